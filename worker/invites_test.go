package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/tasks"
)

// inviteBox is a mailer that keeps what it was given, or fails with err.
type inviteBox struct {
	sent []*mailer.Message
	err  error
}

func (b *inviteBox) Send(_ context.Context, m *mailer.Message) error {
	if b.err != nil {
		return b.err
	}
	b.sent = append(b.sent, m)
	return nil
}

// TestInviteMail: the invite goes to the address with its link, role and
// inviter, as HTML in the newsletter's layout and as text, with a VERP
// tag that reads back as ours and no subscriber's; the service token's
// invite names the newsletter, not "admin-token"; an expired one is not
// sent; a refusal for good is not retried, a passing failure is.
func TestInviteMail(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	box := &inviteBox{}
	r, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	tags := feedback.NewTagger([]byte("secret"))
	h := &InviteMailer{Mailer: box, Render: r, Tags: tags, Newsletter: func() mailer.Newsletter {
		return mailer.Newsletter{Name: "Example News", LogoURL: "https://news.example.org/logo.png", PostalAddress: "1 Main St"}
	}, Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	p := tasks.AccountInvitePayload{Hash: "a1b2c3", Email: "ed@example.org", Role: "editor", By: "alice",
		Link: "https://news.example.org/admin/invite/TOKEN", Expires: now.Add(48 * time.Hour)}
	if err := h.HandleInvite(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if len(box.sent) != 1 {
		t.Fatalf("%d mails", len(box.sent))
	}
	m := box.sent[0]
	if m.To != "ed@example.org" || m.Kind != mailer.KindInvite || !strings.Contains(m.Text, p.Link) || !strings.Contains(m.Text, "alice") ||
		!strings.Contains(m.Text, "editor") || m.UnsubscribeURL != "" {
		t.Fatalf("the mail: %+v", m)
	}
	if !strings.Contains(m.HTML, `href="`+p.Link+`"`) || !strings.Contains(m.HTML, "logo.png") || !strings.Contains(m.Text, "1 Main St") {
		t.Fatalf("the invite is not in the layout with its link and the postal address:\n%s\n%s", m.HTML, m.Text)
	}
	if tr, ok := tags.Trace(m.Tag); !ok || tr.Kind != feedback.KindTest || tr.Subscriber != 0 {
		t.Fatalf("the VERP tag %q reads back as %+v %v", m.Tag, tr, ok)
	}
	byToken := p
	byToken.Hash, byToken.By = "d4e5f6", adminauth.EnvPrincipal.Name
	if err := h.HandleInvite(context.Background(), byToken); err != nil {
		t.Fatal(err)
	}
	if got := box.sent[1]; strings.Contains(got.Text+got.HTML+got.Subject, "admin-token") || !strings.Contains(got.Text, "Example News invited you") {
		t.Fatalf("the token's invite: %s\n%s", got.Subject, got.Text)
	}
	box.sent = box.sent[:1]
	expired := p
	expired.Expires = now
	if err := h.HandleInvite(context.Background(), expired); err != nil || len(box.sent) != 1 {
		t.Fatalf("an expired invite: %v, %d mails", err, len(box.sent))
	}
	box.err = &email.SendError{Class: email.Rejected, Err: errors.New("550 no such user")}
	if err := h.HandleInvite(context.Background(), p); !errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("a refusal for good: %v, want SkipRetry", err)
	}
	box.err = &email.SendError{Class: email.Temporary, Err: errors.New("421 try later")}
	if err := h.HandleInvite(context.Background(), p); err == nil || errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("a passing failure: %v, want a retry", err)
	}
}
