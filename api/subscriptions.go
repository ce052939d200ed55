package api

import (
	"context"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/store"
)

// SetTopics replaces an active subscriber's topics (ids checked against
// the topics file here), keeping their name and time zone, with
// everything the preference centre's save does (the onboarding
// sequence's steps, the webhook when no topic is left): for the console,
// so an admin's change is the person's own change. Errors:
// store.ErrNotFound, store.ErrNotActive, a topics error (the caller's
// mistake, nothing changed), or the store's.
func (s *Server) SetTopics(ctx context.Context, email string, topicIDs []string) (store.Subscriber, error) {
	chosen, err := s.cfg.Topics.Current().Check(topicIDs)
	if err != nil {
		return store.Subscriber{}, &subscribers.TopicsError{Err: err}
	}
	before, err := s.deps.Store.Get(ctx, email)
	if err != nil {
		return before, err
	}
	if before.Status != store.Active {
		return before, store.ErrNotActive
	}
	return s.setPreferences(ctx, before, store.Preferences{Topics: chosen, Name: before.Name, Timezone: before.Timezone})
}

// EndSubscription ends email's subscription as an unsubscribe does: the
// waiting welcome and confirmation are dropped with it, and the webhook
// told. An address not on the list is no error.
func (s *Server) EndSubscription(ctx context.Context, email string) error { return s.end(ctx, email) }
