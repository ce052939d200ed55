package webhooks

import (
	"time"

	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// SubscriberEvent is the event typ (one of the subscriber.* types) about
// sub, as the store answered the change: it happened at sub's
// confirmation (subscriber.confirmed) or at the end of its subscription
// (the others). source names where a bounce or complaint came from (""
// for the others).
func SubscriberEvent(typ string, sub store.Subscriber, source string) tasks.WebhookEvent {
	at := sub.UnsubscribedAt
	if typ == tasks.WebhookSubscriberConfirmed {
		at = sub.ConfirmedAt
	}
	if at.IsZero() {
		at = time.Now() // a record without the time: the moment we heard of it
	}
	return tasks.SubscriberWebhookEvent(typ, tasks.WebhookSubscriberData{ID: sub.ID, Email: sub.Email, Source: source}, at)
}
