package audit

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/logredact"
)

type memory struct{ got []Entry }

func (m *memory) Record(_ context.Context, e Entry) error { m.got = append(m.got, e); return nil }

// TestNoteTakesTheActorFromTheContext: an entry made in a guarded
// request is by its principal; one without any says so rather than
// blaming someone.
func TestNoteTakesTheActorFromTheContext(t *testing.T) {
	m := &memory{}
	var logs bytes.Buffer
	redact := logredact.New([]byte("k"))
	tr := NewTrail(m, redact, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	ctx := adminauth.NewContext(context.Background(), adminauth.Principal{Name: "ann", Role: adminauth.Editor})
	if err := tr.Note(ctx, Entry{Action: IssueSent, Target: "issue:1"}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Note(context.Background(), Entry{Action: ItemAdded, Target: "item:1"}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Note(ctx, Entry{Actor: CLIActor(), Role: CLIRole, Action: TokenCreated, Target: "token:ci"}); err != nil {
		t.Fatal(err)
	}
	if len(m.got) != 3 || m.got[0].Actor != "ann" || m.got[0].Role != "editor" || m.got[1].Actor != "unknown" ||
		!strings.HasPrefix(m.got[2].Actor, "cli") || m.got[2].Role != CLIRole {
		t.Fatalf("entries: %+v", m.got)
	}
	if got := tr.Subscriber("Ann@Example.com"); got != "subscriber:"+redact.Hash("ann@example.com") || strings.Contains(got, "example") {
		t.Fatalf("a subscriber's target: %q", got)
	}
	if logs.Len() != 0 {
		t.Fatalf("logged without a failure: %s", logs.String())
	}
}
