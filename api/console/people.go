package console

import (
	"context"
	"net/http"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/store"
)

// Subscriptions change a person's subscription with everything the
// person's own change does (*subscribers.Service, the API's).
type Subscriptions interface {
	SetTopics(ctx context.Context, email string, topics []string) (store.Subscriber, error)
	EndSubscription(ctx context.Context, email string) error
}

// People are the store's reads about people beyond one record: the list,
// a person's data and history, the overview's figures (store.Redis).
type People interface {
	// ListSubscribers is a page of subscribers of q's status and topic,
	// in id order after q.After (keyset paging).
	ListSubscribers(ctx context.Context, q store.SubscriberQuery) (store.SubscriberPage, error)
	// PersonalData is everything held about one person: consent, mails
	// sent, bounces and complaints.
	PersonalData(ctx context.Context, email string) (store.PersonalData, error)
	// Stats are the counts by status and topic and the last days'
	// counters.
	Stats(ctx context.Context, days int) (store.Stats, error)
	// Search finds people by the beginning of their address or name.
	Search(ctx context.Context, q store.SearchQuery) (store.SearchPage, error)
	// SearchDomain lists the people at a domain (a bounded read of the
	// search index: store.MaxDomainHits, store.MaxDomainScan).
	SearchDomain(ctx context.Context, domain string) ([]store.Subscriber, bool, error)
	// StatsAndGrowth is Stats with each topic's new active
	// subscriptions a day by source, from one read of the counters.
	StatsAndGrowth(ctx context.Context, days int) (store.Stats, []store.TopicGrowth, error)
}

// ListOwner adds and changes people, runs bulk actions and exports the
// list (*subscribers.Service: the one the API's routes call, so the
// console's changes are the API's).
type ListOwner interface {
	AddSubscriber(ctx context.Context, in subscribers.AddInput) (store.Subscriber, error)
	ChangeSubscriber(ctx context.Context, email string, in subscribers.ChangeInput) (store.Subscriber, error)
	StartBulk(ctx context.Context, in subscribers.BulkInput) (subscribers.BulkResult, error)
	StartExport(ctx context.Context, f store.Filter) (listjobs.Job, error)
	ListJob(ctx context.Context, id, kind string) (listjobs.Job, error)
	WriteExportCSV(w http.ResponseWriter, r *http.Request, id string)
}

// PersonalRequests answer a person's requests about their data (GDPR
// Art. 15 and 17) exactly as the API's routes do (*subscribers.Service,
// the API's): the export's JSON is the API's, and an erase deletes the
// person's waiting tasks too.
type PersonalRequests interface {
	Export(ctx context.Context, email string) (subscribers.PersonalExport, error)
	Erase(ctx context.Context, email string) error
}
