package api

import (
	"errors"
	"net/http"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// freshFields is the expired preferences page's button.
var freshFields = fields{"token": textField}

// freshPreferences handles POST /preferences/fresh: the page of an
// expired preferences link asks for a fresh one, mailed to the address
// the link named (never to one typed here). A token we signed, expired
// or not, names the person; anything else is a 400. The answer is the
// same whether the person is still on the list, whether a mail was
// queued or held: limited per client (as the unsubscribe form) and per
// mailbox (the allowance of the unsubscribe link mailed on request, one
// per cooldown and 3 a day), so the button cannot flood an inbox.
func (s *Server) freshPreferences(w http.ResponseWriter, r *http.Request) {
	in, ok := s.readForm(w, r, freshFields)
	if !ok {
		return
	}
	who, err := s.deps.Signer.Verify(token.Preferences, in.get("token"))
	if err != nil && !errors.Is(err, token.ErrExpired) {
		message(w, http.StatusBadRequest, "This link is not valid", "Copy the whole link from the foot of one of our mails.")
		return
	}
	if !s.mailRequestAllowed(w, r, "cross-site request refused: use the button on our page") {
		return
	}
	email, err := s.addressOf(r.Context(), who)
	if err == nil {
		err = s.mailFreshLink(r, email)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.deps.Log.Error("preferences: a fresh link", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "we could not send the link just now, please try again")
		return
	}
	message(w, http.StatusAccepted, "Check your inbox",
		"If you are still subscribed, a mail with a fresh link to your preferences is on its way to the address this link was for.")
}

// mailFreshLink queues a fresh preferences link to email within its
// mailbox's allowance (held: nothing, and no error).
func (s *Server) mailFreshLink(r *http.Request, email string) error {
	ctx := r.Context()
	send, err := s.deps.Store.TakeHold(ctx, store.HoldUnsubscribe, email, s.cfg.ConfirmHold)
	if err != nil || !send {
		if err == nil {
			s.deps.Log.Info("preferences: fresh link held by the cooldown", "domain", address.Domain(email))
		}
		return err
	}
	if _, err := s.deps.Queue.EnqueueContext(ctx, tasks.NewPreferencesLink(email)); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		// Nothing was sent: the person's next try must not be held.
		if gerr := s.deps.Store.GiveBackHold(ctx, store.HoldUnsubscribe, email); gerr != nil {
			s.deps.Log.Warn("preferences: give the allowance back", "err", gerr)
		}
		return err
	}
	return nil
}
