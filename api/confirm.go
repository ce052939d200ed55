package api

import (
	"cmp"
	"errors"
	"net/http"
	"strings"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// confirmPage handles GET (and HEAD) /confirm?token=: a page whose button
// confirms. Mail security gateways fetch every link of a mail they
// receive, so a GET that confirmed would let a scanner opt a bombed victim
// in: only the POST changes anything.
func (s *Server) confirmPage(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("token")
	email, ok := s.confirmToken(w, r, tok)
	if !ok {
		return
	}
	renderPage(w, http.StatusOK, "confirm", pageData{Title: "Confirm your subscription", Email: email, Token: tok})
}

// confirmToken verifies a confirm token and finds the address it is for,
// answering the error page itself.
func (s *Server) confirmToken(w http.ResponseWriter, r *http.Request, tok string) (string, bool) {
	who, err := s.deps.Signer.Verify(token.Confirm, tok)
	if errors.Is(err, token.ErrExpired) {
		message(w, http.StatusBadRequest, "This link has expired", "Confirmation links work for 7 days. Subscribe again to get a new one.")
		return "", false
	}
	if err != nil {
		message(w, http.StatusBadRequest, "This link is not valid", "Copy the whole link from the mail, or subscribe again to get a new one.")
		return "", false
	}
	email, err := s.addressOf(r.Context(), who)
	if errors.Is(err, store.ErrNotFound) {
		message(w, http.StatusBadRequest, "This link is no longer valid", "Subscribe again to get a new one.")
		return "", false
	}
	if err != nil {
		s.deps.Log.Error("confirm: store", "err", err)
		message(w, http.StatusServiceUnavailable, "Please try again", "We could not confirm your subscription just now.")
		return "", false
	}
	return email, true
}

// confirm handles POST /confirm (form field token): activate and schedule
// the welcome. Confirming twice is harmless and says so.
func (s *Server) confirm(w http.ResponseWriter, r *http.Request) {
	in, ok := s.readForm(w, r, confirmFields)
	if !ok {
		return
	}
	email, ok := s.confirmToken(w, r, in.get("token"))
	if !ok {
		return
	}
	ctx := r.Context()
	job := s.firstStep(email, s.deps.Now())
	person, err := s.deps.Store.Confirm(ctx, email, job.Outbox())
	switch {
	case errors.Is(err, store.ErrAlreadyActive):
		// A used link proves nothing now: it may sit in an old mail, a
		// forwarded one, a scanner's log. Its page offers nothing that
		// acts for the person (no preferences token, no push offer).
		message(w, http.StatusOK, "Already confirmed", "Your subscription of "+email+" is active.")
		return
	case errors.Is(err, store.ErrNotPending), errors.Is(err, store.ErrNotFound):
		message(w, http.StatusBadRequest, "This link is no longer valid", "The subscription of "+email+" has ended. Subscribe again to restart it.")
		return
	case err != nil:
		s.deps.Log.Error("confirm: store", "err", err)
		message(w, http.StatusServiceUnavailable, "Please try again", "We could not confirm your subscription just now.")
		return
	}
	if _, err := s.deps.Jobs.Dispatch(ctx, job); err != nil {
		s.deps.Log.Warn("confirm: enqueue welcome failed, the relay will retry", "task", job.ID, "err", err)
	}
	s.deps.Notify.NotifyLogged(ctx, webhooks.SubscriberEvent(tasks.WebhookSubscriberConfirmed, person, ""))
	s.confirmed(w, r, person.ID, email)
}

// confirmed is the page after confirming: the publisher's heading and
// text from the settings (the built-in words when none), a link onward
// (the settings' confirmed_url, else the archive when it is served), and
// the offer of web push (with a preferences token: the person has just
// proven the address theirs, with this very confirmation; a link used
// before gets no such page).
func (s *Server) confirmed(w http.ResponseWriter, r *http.Request, id int64, email string) {
	nl := s.newsletter(r)
	d := pageData{Title: cmp.Or(nl.ConfirmedHeading, "Subscription confirmed"),
		Lines: []string{"Thank you! " + email + " will get our newsletter from now on."}, Newsletter: nl}
	if nl.ConfirmedText != "" {
		d.Lines = paragraphs(nl.ConfirmedText)
	}
	switch {
	case nl.ConfirmedURL != "":
		d.Next = &pageLink{URL: nl.ConfirmedURL, Label: "Continue"}
	case s.archive != nil:
		d.Next = &pageLink{URL: "/archive", Label: "Read past issues"}
	}
	if s.pushOn() {
		d.Push = s.offerPush(s.deps.Signer.Sign(token.Preferences, id))
	}
	renderPage(w, http.StatusOK, "message", d)
}

// paragraphs splits plain text at blank lines, each paragraph's lines
// joined by spaces.
func paragraphs(text string) []string {
	var out []string
	for _, p := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			out = append(out, p)
		}
	}
	return out
}
