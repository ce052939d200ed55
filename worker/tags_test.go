package worker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
)

// TestEveryMailCarriesItsTag sends one mail of every kind through the one
// delivery path (the Deliverer, over SMTP with a bounce address) to a real
// SMTP server: the confirmation, the welcome, the digest, the events mail,
// the unsubscribe link, each built-in step of the onboarding sequence, and
// a step whose template only the operator's folder has. Each must leave
// with a VERP tag naming its subscriber in the envelope sender and in the
// Message-ID, so that whatever bounces can be traced (and a report about a
// mail without one would have to be ignored).
func TestEveryMailCarriesItsTag(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"operator-step.txt":  "{{define \"subject\"}}A step of our own{{end}}Hello.\n",
		"operator-step.html": "{{define \"body\"}}<p>Hello.</p>{{end}}",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	steps := []string{"welcome", "getting-started", "best-of", "operator-step"}
	render, err := mailer.NewRenderer(dir, steps...)
	if err != nil {
		t.Fatal(err)
	}
	srv := smtptest.Start(t)
	cfg, _ := email.ParseServerURL(srv.URL())
	m, err := NewSMTPMailer(mailer.ComposeOptions{From: "News <news@example.com>", BounceAddress: "bounces@b.example.com"}, email.SMTPOptions{Server: cfg, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	st := newStore(t)
	tags := feedback.NewTagger([]byte("0123456789abcdef"))
	d := NewHandlers(Deps{Store: st, Mailer: m, Render: render, Tags: tags, Log: discard}).Mails.Deliver

	kinds := mailer.Kinds()
	for _, s := range steps {
		if !slices.Contains(kinds, s) { // the welcome is a kind and the first step
			kinds = append(kinds, s)
		}
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			email := kind + "@example.org"
			sub, err := st.Subscribe(ctx, store.SubscribeRequest{Email: email, Activate: true})
			if err != nil {
				t.Fatal(err)
			}
			data := mailer.Data{
				Email: email, ConfirmURL: "https://news.example.com/confirm?token=t",
				UnsubscribeURL: "https://news.example.com/u?token=t", PreferencesURL: "https://news.example.com/preferences?token=t",
				Topic: "Weekly digest", Period: "2026-W49",
				Entries: []mailer.Entry{{Title: "Item", URL: "https://example.com/item"}},
			}
			if kind == mailer.KindConfirm {
				data.UnsubscribeURL, data.PreferencesURL = "", ""
			}
			err = d.DeliverOne(ctx, Mail{To: sub, Mark: store.Mark{Kind: kind, Key: "k", SubscriberID: sub.ID}, Data: data})
			if err != nil {
				t.Fatal(err)
			}
			got := srv.To(email)
			if len(got) != 1 {
				t.Fatalf("%d mails to %s", len(got), email)
			}
			envTag := feedback.TagOfAddress(got[0].From)
			idTag := feedback.TagOfMessageID(got[0].Header.Get("Message-Id"))
			for where, tag := range map[string]string{"envelope sender " + got[0].From: envTag, "Message-ID " + got[0].Header.Get("Message-Id"): idTag} {
				id, _, ok := tags.Parse(tag)
				if !ok || id != sub.ID {
					t.Errorf("%s mail: %s carries no tag naming subscriber %d (tag %q)", kind, where, sub.ID, tag)
				}
			}
			if !strings.HasSuffix(got[0].From, "@b.example.com") {
				t.Errorf("envelope sender %q is not at the bounce domain", got[0].From)
			}
		})
	}
}
