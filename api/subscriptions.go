package api

import (
	"context"

	"github.com/newsletter/newsletter/store"
)

// SetTopics replaces an active subscriber's topics with everything the
// preference centre's save does (subscribers.Service.SetTopics).
func (s *Server) SetTopics(ctx context.Context, email string, topicIDs []string) (store.Subscriber, error) {
	return s.subs.SetTopics(ctx, email, topicIDs)
}

// EndSubscription ends email's subscription as an unsubscribe does
// (subscribers.Service.EndSubscription).
func (s *Server) EndSubscription(ctx context.Context, email string) error {
	return s.subs.EndSubscription(ctx, email)
}
