package console

import (
	"context"
	"time"

	"github.com/newsletter/newsletter/store"
)

// Subscriptions change a person's subscription with everything the
// person's own change does (*api.Server).
type Subscriptions interface {
	SetTopics(ctx context.Context, email string, topics []string) (store.Subscriber, error)
	EndSubscription(ctx context.Context, email string) error
}

// People are the store's reads and requests about people beyond one
// record: the list, a person's history, export and erase, the figures.
type People interface {
	// ListSubscribers is up to limit subscribers with ids above after, of
	// status and topic ("" : any), in id order.
	ListSubscribers(ctx context.Context, status store.Status, topic string, after int64, limit int) ([]store.Subscriber, error)
	// History is what happened to one person: consent, mails, bounces,
	// complaints.
	History(ctx context.Context, sub store.Subscriber) (History, error)
	// Export is everything held about email, as JSON.
	Export(ctx context.Context, email string) ([]byte, error)
	// Erase removes email for good; only a keyed hash stays.
	Erase(ctx context.Context, email string) error
	// Stats are the counts and the daily figures of the last days days.
	Stats(ctx context.Context, days int) (Stats, error)
}

// History is one person's record beyond their subscription.
type History struct {
	Consent    []Event
	Mails      []Event
	Bounces    []Event
	Complaints []Event
}

// Event is one dated line of a person's history.
type Event struct {
	At   time.Time
	What string
}

// Stats are the overview's figures.
type Stats struct {
	ByStatus map[store.Status]int64
	ByTopic  map[string]int64
	Days     []Day
}

// Day is one day's signups, confirmations and unsubscribes.
type Day struct {
	Day                                  time.Time
	Signups, Confirmations, Unsubscribes int64
}
