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

// unsubscribePage handles GET /unsubscribe?token=: a page with a button.
// A GET never unsubscribes, because mail scanners follow links.
func (s *Server) unsubscribePage(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("token")
	email, err := s.deps.Signer.Verify(token.Unsubscribe, tok)
	if err != nil {
		message(w, http.StatusBadRequest, "This link is not valid", "Copy the whole unsubscribe link from the mail.")
		return
	}
	renderPage(w, http.StatusOK, "unsubscribe", pageData{Title: "Unsubscribe", Email: email, Token: tok})
}

// unsubscribe handles POST /unsubscribe in its three forms: RFC 8058
// one-click (token in the query, answered 200 with no redirect), the button
// of the page (token in the body), and an address (form or JSON).
func (s *Server) unsubscribe(w http.ResponseWriter, r *http.Request) {
	oneClick := r.URL.Query().Get("token")
	in, err := s.readInput(w, r, false)
	if errors.Is(err, errTooLarge) {
		fail(w, r, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	if err != nil && oneClick == "" {
		fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	var email string
	switch tok := firstNonEmpty(oneClick, in["token"]); {
	case tok != "":
		if email, err = s.deps.Signer.Verify(token.Unsubscribe, tok); err != nil {
			fail(w, r, http.StatusBadRequest, "this unsubscribe link is not valid")
			return
		}
	default:
		if email, err = address.Normalize(in["email"]); err != nil {
			fail(w, r, http.StatusBadRequest, "please enter a valid e-mail address")
			return
		}
	}
	if err := s.end(r, email); err != nil {
		s.deps.Log.Error("unsubscribe: store", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "we could not unsubscribe you just now, please try again")
		return
	}
	switch {
	case oneClick != "":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("unsubscribed\n")) // RFC 8058 reads only the status
	case wantsJSON(r):
		writeJSON(w, http.StatusAccepted, map[string]string{"email": email, "status": string(store.Unsubscribed)})
	default:
		message(w, http.StatusAccepted, "You are unsubscribed", "We will not send any more mail to "+email+".")
	}
}

// end marks the subscription inactive first (the handlers' re-check stops
// anything already queued), then deletes the waiting welcome and
// confirmation. DeleteTask fails on a running task; the re-check covers it.
func (s *Server) end(r *http.Request, email string) error {
	pending := tasks.PendingMails(email)
	ids := make([]string, len(pending))
	for i, p := range pending {
		ids[i] = p.ID
	}
	_, err := s.deps.Store.Unsubscribe(r.Context(), email, ids...)
	if errors.Is(err, store.ErrNotFound) {
		return nil // do not tell strangers who is subscribed
	}
	if err != nil {
		return err
	}
	if s.deps.Tasks != nil {
		for _, p := range pending {
			if err := s.deps.Tasks.DeleteTask(p.Queue, p.ID); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
				s.deps.Log.Info("unsubscribe: task not deleted, the handler's re-check will skip it", "queue", p.Queue, "err", err)
			}
		}
	}
	return nil
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}
