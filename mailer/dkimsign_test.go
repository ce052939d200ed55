package mailer

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/smtptest"
)

// TestDKIMSignsPreparedMails: prepared digests sent over a session with an
// RSA and an Ed25519 key verify with go-msgauth, for readers with and
// without a name (whose mails share a longer beginning), and their body
// hashes went on from their template's shared beginning.
func TestDKIMSignsPreparedMails(t *testing.T) {
	keys := newTestKeys(t)
	signer, err := email.NewDKIM("example.com", keys.rsa, keys.ed)
	if err != nil {
		t.Fatal(err)
	}
	srv := smtptest.Start(t)
	cfg, err := ParseServerURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSMTP(SMTPOptions{Server: cfg, From: "News <news@example.com>", DKIM: signer, ListID: "Newsletter <news.example.com>"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Prepare(KindDigest, Data{Period: "2026-W49", Entries: encodeEntries, Topic: "Weekly digest"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sess, err := s.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"Ann", "", "Zoë Ó Briain", "", strings.Repeat("Jürgen ", 14) + "Ende", "Bob"}
	for i, name := range names {
		msg, err := p.RenderFor(sess, Data{Email: fmt.Sprintf("r%d@example.org", i), Name: name,
			UnsubscribeURL: "https://n.example/u?token=t" + fmt.Sprint(i), PreferencesURL: "https://n.example/p?token=t"})
		if err != nil {
			t.Fatal(err)
		}
		msg.ToName = name
		if err := sess.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	for _, m := range srv.WaitFor(t, len(names), 5*time.Second) {
		verifs, err := keys.Verify(m.Data)
		if err != nil || len(verifs) != 2 {
			t.Fatalf("%s: %v, %d signatures", m.To[0], err, len(verifs))
		}
		for _, v := range verifs {
			if v.Err != nil {
				t.Fatalf("%s: a signature does not verify: %v\n%s", m.To[0], v.Err, m.Data)
			}
		}
	}
	if fast, _, encoded := p.Counts(); encoded != len(names) || fast != len(names) {
		t.Fatalf("%d filled in, %d encoded; want all %d", fast, encoded, len(names))
	}
	// Each template's body hash starts from its shared beginning, computed
	// once: up to the greeting with a name, up to the footer's address
	// (past all the items) without one.
	for sh, v := range p.variants {
		for _, tmpl := range v.wire {
			if tmpl.prefix == nil {
				t.Errorf("a template's body hash did not start from its shared beginning")
			}
			pastItems := bytes.Contains(tmpl.bodyPrefix, []byte("Caf=C3=A9 news"))
			if nameless := sh[1] == valueEmpty; pastItems != nameless {
				t.Errorf("name %v: the shared beginning reaches past the items: %v (%d bytes)", !nameless, pastItems, len(tmpl.bodyPrefix))
			}
		}
	}
}
