package mailer

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email/smtptest"
)

// TestTransactionModes sends prepared digests over one session of the SMTP
// transport: the server receives exactly go-mail's bytes of the full
// render (lines that start with a dot included: quoted-printable's soft
// breaks start lines with one). The transport's own modes (pipelined or
// not, BDAT or DATA), refusals and writes per mail are channels/email's
// TestTransactionModes, over mails like these.
func TestTransactionModes(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	entries := append([]Entry{{Title: "Dots", URL: "https://example.com/dots", Summary: strings.Repeat(".", 300)}}, encodeEntries...)
	shared := Data{Period: "2026-W49", Entries: entries, Topic: "Weekly digest"}
	srv := smtptest.Start(t)
	cfg, err := ParseServerURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSMTP(SMTPOptions{Server: cfg, From: "News <news@example.com>", PoolSize: 1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := r.Prepare(KindDigest, shared)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sess, err := s.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	sent := map[string]*Message{}
	names := encodeNames()
	for i := range 16 {
		local, name := fmt.Sprintf("r%d", i), names[i%len(names)]
		d := Data{Email: local + "@x.org", Name: name, UnsubscribeURL: "https://n.example/u?token=" + local,
			PreferencesURL: "https://n.example/p?token=" + local}
		msg, err := p.Render(d)
		if err != nil {
			t.Fatal(err)
		}
		msg.ToName, msg.Tag = name, "tag-"+local
		if err := sess.Send(ctx, msg); err != nil {
			t.Fatalf("%s: %v", local, err)
		}
		sent[msg.To] = msg
	}
	got := srv.WaitFor(t, len(sent), 5*time.Second)
	if len(got) != len(sent) {
		t.Fatalf("server accepted %d mails; %d were sent", len(got), len(sent))
	}
	for _, m := range got {
		msg := sent[m.To[0]]
		full, err := r.Render(KindDigest, withPersonal(shared, personalValues(Data{Email: msg.To, Name: msg.ToName,
			UnsubscribeURL: msg.UnsubscribeURL, PreferencesURL: "https://n.example/p?token=" + strings.Split(msg.To, "@")[0]})))
		if err != nil {
			t.Fatal(err)
		}
		full.ToName, full.Tag, full.MessageID, full.Date, full.boundary = msg.ToName, msg.Tag, msg.MessageID, msg.Date, msg.boundary
		want, err := s.writeGoMail(full, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Data, want) {
			t.Fatalf("%s: the server got other bytes than go-mail's full render:\n%s", msg.To, diffContext(m.Data, want))
		}
		if m.From != "news@example.com" {
			t.Errorf("envelope sender %q", m.From)
		}
	}
	if fast, _, encoded := p.Counts(); encoded != fast || fast < 16 {
		t.Errorf("%d mails filled in, %d from the encoded template", fast, encoded)
	}
}
