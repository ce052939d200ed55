package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// testAudit: entries come back newest first with their fields, pages
// follow one another by id, and a bad id is refused.
func testAudit(t *testing.T, _ Harness, s store.Store) {
	ctx := context.Background()
	if got, err := s.AuditEntries(ctx, "", 10); err != nil || len(got) != 0 {
		t.Fatalf("an empty log: %v %v", got, err)
	}
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	for i, action := range []string{audit.IssueCreated, audit.IssueSent, audit.SuppressionLifted, audit.TokenCreated, audit.DigestRun} {
		if err := s.Record(ctx, audit.Entry{At: at, Actor: "ann", Role: "editor", Action: action, Target: "issue:" + string(rune('1'+i)), Detail: "d"}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := s.AuditEntries(ctx, "", 2)
	if err != nil || len(first) != 2 || first[0].Action != audit.DigestRun || first[1].Action != audit.TokenCreated {
		t.Fatalf("the newest two: %+v %v", first, err)
	}
	if e := first[0]; e.ID == "" || !e.At.Equal(at) || e.Actor != "ann" || e.Role != "editor" || e.Target != "issue:5" || e.Detail != "d" {
		t.Fatalf("an entry: %+v", e)
	}
	rest, err := s.AuditEntries(ctx, first[1].ID, 10)
	if err != nil || len(rest) != 3 || rest[0].Action != audit.SuppressionLifted || rest[2].Action != audit.IssueCreated {
		t.Fatalf("the page after %s: %+v %v", first[1].ID, rest, err)
	}
	if got, err := s.AuditEntries(ctx, rest[2].ID, 10); err != nil || len(got) != 0 {
		t.Fatalf("after the oldest: %+v %v", got, err)
	}
	for _, bad := range []string{"x", "1-", "-1", "1-2-3", "(1-0"} {
		if _, err := s.AuditEntries(ctx, bad, 10); !errors.Is(err, store.ErrBadAuditID) {
			t.Errorf("after=%q: %v, want ErrBadAuditID", bad, err)
		}
	}
}
