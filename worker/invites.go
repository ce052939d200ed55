package worker

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/tasks"
)

// InviteMailer mails the console's invites (email:invite): the link, the
// role and who invited, in the newsletter's layout (HTML and text), with
// a VERP return path as every mail; the api only enqueues it.
type InviteMailer struct {
	Mailer mailer.Mailer
	Render *mailer.Renderer
	// Newsletter are the settings in effect (Links.Newsletter); nil: none.
	Newsletter func() mailer.Newsletter
	Tags       *feedback.Tagger
	Now        func() time.Time
	Log        *slog.Logger
}

// inviter is how the invite names who sent it: the inviting account, or,
// for the service's own token (whose name is a credential's, not a
// person's), the newsletter.
func inviter(by string, nl mailer.Newsletter) string {
	if by == "" || by == adminauth.EnvPrincipal.Name {
		return cmp.Or(nl.Name, "The newsletter's administrator")
	}
	return by
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
	var nl mailer.Newsletter
	if h.Newsletter != nil {
		nl = h.Newsletter()
	}
	msg, err := h.Render.Invite(p.Email, mailer.Invite{By: inviter(p.By, nl), Role: p.Role, Link: p.Link,
		Expires: p.Expires.UTC().Format("2006-01-02 15:04 UTC")}, nl)
	if err != nil {
		return fmt.Errorf("invite: render: %w", err)
	}
	msg.Tag = h.Tags.InviteTag(p.Hash)
	err = h.Mailer.Send(ctx, msg)
	if se := email.AsSendError(err); se != nil && !se.Temporary() {
		h.Log.Error("invite: the mail server refused it for good", "to", p.Email, "err", err)
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	return err
}
