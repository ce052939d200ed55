package store

import (
	"context"
	"errors"
	"time"
)

// Item is one entry of a topic's digest.
type Item struct {
	ID      int64  `json:"id"`
	Title   string `json:"title"`
	URL     string `json:"url"`
	Summary string `json:"summary,omitempty"`
	// Topic is the topic whose digest lists the item; AddItem makes an
	// empty one topics.Digest, the weekly digest's.
	Topic       string    `json:"topic"`
	PublishedAt time.Time `json:"published_at"`
}

// ErrNoItem is an item id that names no item.
var ErrNoItem = errors.New("no such item")

// Digest run states.
const (
	RunPlanning = "planning" // the planner is walking the audience
	RunPlanned  = "planned"  // every batch is enqueued
	RunEmpty    = "empty"    // nothing new to send this period
)

// DigestRun is the record of one period's digest: what it sends, how far the
// planner got, and what happened to each recipient.
type DigestRun struct {
	Period   string `json:"period"`
	State    string `json:"state"`
	Items    []Item `json:"items"`
	Audience int64  `json:"audience"` // active subscribers of the digest topic when the run began
	Cursor   int64  `json:"cursor"`   // the planner's furthest place: a subscriber id, or a walk key (store.WalkKey) for a run sent as an issue walked by shard
	Planned  int64  `json:"planned"`
	Sent     int64  `json:"sent"`
	Skipped  int64  `json:"skipped"`
	Failed   int64  `json:"failed"`
	// Bounces and Complaints are the reports about this run's mail that
	// arrived after it was sent (RecordFeedback); the rates are per mail
	// sent. Mailbox providers want complaints under 0.1 %.
	Bounces       int64     `json:"bounces"`
	Complaints    int64     `json:"complaints"`
	BounceRate    float64   `json:"bounce_rate"`
	ComplaintRate float64   `json:"complaint_rate"`
	CreatedAt     time.Time `json:"created_at"`
	PlannedAt     time.Time `json:"planned_at,omitzero"`
	// Issue is the issue the run's items are sent as (slug
	// digest-<period>; its progress is GET /api/issues/{id}/progress):
	// the counters above are the issue's then. 0 until it is made, and
	// for an empty run.
	Issue int64 `json:"issue,omitempty"`
	// AsIssue: the run was started by a version that sends the digest as
	// an issue. A run an older version started went out as email:digest
	// batches under digest marks, which this version no longer sends nor
	// sends again as an issue: start-up refuses while a task of such a run
	// is still queued (cmd/newsletter/olderdata.go), so the older version
	// finishes it and nobody of it gets the week twice.
	AsIssue bool `json:"-"`
}

// Recipient outcomes other than sent (sent is the delivery mark itself).
const (
	OutcomeSkipped = "skipped"
	OutcomeFailed  = "failed"
)

// ErrNoRun means no digest run exists for the period.
var ErrNoRun = errors.New("no digest run for that period")

// DigestMarkKind is the mark kind of digest mails: a run's sent counter
// counts these marks for its period.
const DigestMarkKind = "digest"

// Digests is the store's side of the digest: items, runs, the keyset walk
// of active subscribers and recipient outcomes.
type Digests interface {
	// AddItem stores an item published now, for its Topic (the digest's
	// when empty).
	AddItem(ctx context.Context, it Item) (Item, error)
	// ItemsAfter lists up to limit items of topic with ids greater than
	// after, in id order. A digest run takes the digest topic's items.
	ItemsAfter(ctx context.Context, topic string, after int64, limit int) ([]Item, error)
	// Item is one item (ErrNoItem when there is none).
	Item(ctx context.Context, id int64) (Item, error)
	// UpdateItem replaces an item's title, URL and summary; its id,
	// topic and time stay (ErrNoItem when there is none).
	UpdateItem(ctx context.Context, it Item) (Item, error)
	// DeleteItem removes an item (ErrNoItem when there is none): a
	// digest run that listed it lists it no more.
	DeleteItem(ctx context.Context, id int64) error
	// StartDigestRun records the run for period once: the digest topic's items added since
	// the previous run began (every item, for the first run) and the
	// audience size. Items are taken by id, not by time, so an item added in
	// the same instant a run starts belongs to exactly one period. created is false when the run already existed; either
	// way the stored run is returned.
	StartDigestRun(ctx context.Context, period string) (run DigestRun, created bool, err error)
	// DigestRun returns the run with its counters.
	DigestRun(ctx context.Context, period string) (DigestRun, error)
	// DigestItems returns the run's items alone (ErrNoRun when there is
	// no such run): what a mail that lists them needs, without the
	// counters, which are sums over every shard.
	DigestItems(ctx context.Context, period string) ([]Item, error)
	// LatestDigestPeriod is the period of the most recently started run
	// ("" before the first).
	LatestDigestPeriod(ctx context.Context) (string, error)
	// AdvanceDigestRun saves the planner's cursor after a page: planned
	// grows by n; done marks the run planned. A page whose cursor is not
	// past the saved one counts nothing (it was counted), so saving a
	// page again is safe.
	AdvanceDigestRun(ctx context.Context, period string, cursor int64, n int, done bool) error
	// AudienceAfter lists up to limit ids greater than cursor of active
	// subscribers with topic on ("": every active one), in id order
	// (keyset pagination: never OFFSET).
	AudienceAfter(ctx context.Context, topic string, cursor int64, limit int) ([]int64, error)
	// SubscribersByID loads subscribers; a missing one has ID 0.
	SubscribersByID(ctx context.Context, ids []int64) ([]Subscriber, error)
	// SetOutcome records that a recipient of period was skipped or failed;
	// recording it again changes nothing.
	SetOutcome(ctx context.Context, period, outcome string, ids ...int64) error
}

// WithIssue is the run counted by the issue it is sent as: planned, sent,
// skipped and failed are the issue's; bounces and complaints add the
// issue's (traced by its mails' tags) to the run's own (reports whose mail
// named no issue, counted against the latest run); the run is planned once
// the issue's walk is done.
func (r DigestRun) WithIssue(p IssueProgress) DigestRun {
	r.Planned, r.Sent, r.Skipped, r.Failed = p.Planned, p.Sent, p.Skipped, p.Failed
	r.Cursor = p.MaxCursor
	r.Bounces += p.Bounces
	r.Complaints += p.Complaints
	if r.State == RunPlanning && p.PlanDone {
		r.State = RunPlanned
	}
	return r
}

// WithRates fills in the rates from the counters.
func (r DigestRun) WithRates() DigestRun {
	if r.Sent > 0 {
		r.BounceRate = float64(r.Bounces) / float64(r.Sent)
		r.ComplaintRate = float64(r.Complaints) / float64(r.Sent)
	}
	return r
}
