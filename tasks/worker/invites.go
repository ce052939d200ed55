package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/tasks"
)

// InviteMailer mails the console's invites (email:invite): the link, the
// role and who invited. A plain text mail through the service's mailer,
// as every transactional mail; the api only enqueues it.
type InviteMailer struct {
	Mailer mailer.Mailer
	Now    func() time.Time
	Log    *slog.Logger
}

// HandleInvite sends one invite. An invite past its expiry is not sent
// (its link would not work); an address the mail server refuses for good
// is not retried. The log names the address (the service's log handler
// redacts it to its domain and keyed hash).
func (h *InviteMailer) HandleInvite(ctx context.Context, p tasks.AccountInvitePayload) error {
	if !h.Now().Before(p.Expires) {
		h.Log.Warn("invite: expired before it could be mailed", "to", p.Email)
		return nil
	}
	msg := &mailer.Message{
		Kind:    mailer.KindInvite,
		To:      p.Email,
		Subject: "You are invited to the newsletter console",
		Text: fmt.Sprintf("%s invited you to the newsletter console as %s.\n\n"+
			"Open this link to choose your password and set up your authenticator app:\n\n%s\n\n"+
			"The link works once, until %s. If you did not expect this mail, ignore it.\n",
			p.By, p.Role, p.Link, p.Expires.UTC().Format("2006-01-02 15:04 UTC")),
	}
	err := h.Mailer.Send(ctx, msg)
	if se := mailer.AsSendError(err); se != nil && !se.Temporary() {
		h.Log.Error("invite: the mail server refused it for good", "to", p.Email, "err", err)
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	return err
}
