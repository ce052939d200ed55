package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
)

// The undo of an unsubscribe: the page that says "you are unsubscribed"
// (after the unsubscribe page's button, or the preference centre's
// Leave everything) carries a form whose button posts a resubscribe
// token to POST /resubscribe. The token names the person and exactly the
// topics they just left, and works for token.ResubscribeTTL. Only a POST
// acts (link scanners fetch with GET and HEAD); the one-click of RFC 8058
// answers no page, so it offers none.

var resubscribeFields = fields{"token": textField}

// undoToken is the resubscribe token for sub having left topics ("":
// nothing to undo).
func (s *Server) undoToken(sub store.Subscriber, topics []string) string {
	if sub.ID == 0 || len(topics) == 0 {
		return ""
	}
	return s.deps.Signer.SignTopic(token.Resubscribe, sub.ID, strings.Join(topics, ","))
}

// resubscribe handles POST /resubscribe: the topics the token names are
// turned on again (those the topics file still offers), for an active
// person added to what they have, for one whose subscription ended
// reopened with those topics alone (no confirmation: the token came from
// the page their own link opened, a week ago at most). A suppressed
// address (bounced, complained) or a pending one stays as it is.
func (s *Server) resubscribe(w http.ResponseWriter, r *http.Request) {
	in, ok := s.readForm(w, r, resubscribeFields)
	if !ok {
		return
	}
	who, err := s.deps.Signer.Verify(token.Resubscribe, in.get("token"))
	if err != nil || who.Legacy() {
		message(w, http.StatusBadRequest, "This button no longer works",
			"It works for a week after you unsubscribed. To get our mail again, subscribe on the front page.")
		return
	}
	if !s.ownPage(r) {
		fail(w, r, http.StatusForbidden, "cross-site request refused: use the button on our page")
		return
	}
	back := s.stillOffered(strings.Split(who.Topic, ","))
	sub, err := s.deps.Store.GetByID(r.Context(), who.ID)
	switch {
	case errors.Is(err, store.ErrNotFound) || len(back) == 0:
		message(w, http.StatusOK, "Nothing to resubscribe", "What you left is no longer on offer. Subscribe on the front page to choose again.")
		return
	case err != nil:
		s.resubscribeFailed(w, r, err)
		return
	}
	if err := s.reopen(r.Context(), sub, back); err != nil {
		if errors.Is(err, errCannotReopen) {
			message(w, http.StatusConflict, "We cannot resubscribe you here", "Subscribe on the front page: we will mail you a link to confirm.")
			return
		}
		s.resubscribeFailed(w, r, err)
		return
	}
	names := make([]string, len(back))
	for i, id := range back {
		names[i] = s.topicName(id)
	}
	message(w, http.StatusOK, "You are subscribed again", "We will send "+strings.Join(names, ", ")+" to "+sub.Email+" again.")
}

var errCannotReopen = errors.New("neither active nor unsubscribed")

// reopen turns topics on again for sub (see resubscribe).
func (s *Server) reopen(ctx context.Context, sub store.Subscriber, topics []string) error {
	switch sub.Status {
	case store.Active:
		union := slices.Clone(sub.Topics)
		for _, id := range topics {
			if !slices.Contains(union, id) {
				union = append(union, id)
			}
		}
		_, err := s.setPreferences(ctx, sub, store.Preferences{Topics: union, Name: sub.Name, Timezone: sub.Timezone})
		return err
	case store.Unsubscribed:
		_, err := s.deps.Store.Subscribe(ctx, store.SubscribeRequest{Email: sub.Email, Name: sub.Name, Timezone: sub.Timezone,
			Topics: topics, Activate: true, Source: store.SourceForm})
		switch {
		case errors.Is(err, store.ErrAlreadyActive):
			return nil // active again meanwhile: nothing to undo
		case errors.Is(err, store.ErrSuppressed):
			return errCannotReopen // bounced or complained since
		}
		return err
	}
	return errCannotReopen
}

// stillOffered are the ids of ids that the topics file has and has not
// retired.
func (s *Server) stillOffered(ids []string) []string {
	var out []string
	for _, id := range ids {
		if t, ok := s.cfg.Topics.Current().Topic(id); ok && !t.Retired && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func (s *Server) resubscribeFailed(w http.ResponseWriter, r *http.Request, err error) {
	s.deps.Log.Error("resubscribe: store", "err", err)
	fail(w, r, http.StatusServiceUnavailable, "we could not resubscribe you just now, please try again")
}
