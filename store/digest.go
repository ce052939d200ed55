package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/redis/go-redis/v9"
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

// startRunScript creates a period's digest run once, fixing its items
// (those after the last item any run took) and its audience.
//
//	KEYS[1]  prefixRun .. period   the run hash
//	KEYS[2]  keyLastItem           highest item id any run took
//	KEYS[3]  keyItems
//	KEYS[4]  keyLatestRun          period of the latest run
//	ARGV[1]  now, unix ms
//	ARGV[2]  period
//	ARGV[3]  the audience: the digest topic's active subscribers, counted
//	         over the shards just before (audience)
//
// Writes the run hash: items (comma-separated ids), created, audience (the
// active subscribers of the digest topic), cursor, planned, state, and
// as_issue (the run is sent as an issue: DigestRun.AsIssue). Answers
// 1 when it created the run, 0 when the run existed.
var startRunScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local last = redis.call('GET', KEYS[2]) or '0'
local ids = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. last, '+inf')
local state = 'planning'
if #ids == 0 then
  state = 'empty'
else
  redis.call('SET', KEYS[2], ids[#ids])
end
redis.call('HSET', KEYS[1], 'items', table.concat(ids, ','), 'created', ARGV[1],
  'audience', ARGV[3], 'cursor', 0, 'planned', 0, 'state', state, 'as_issue', 1)
redis.call('SET', KEYS[4], ARGV[2])
return 1
`)

// StartDigestRun implements Digests.
func (r *Redis) StartDigestRun(ctx context.Context, period string) (DigestRun, bool, error) {
	audience, err := r.audience(ctx, []string{topics.Digest})
	if err != nil {
		return DigestRun{}, false, fmt.Errorf("start digest %s: count its audience: %w", period, err)
	}
	n, err := startRunScript.Run(ctx, r.rdb, []string{runKey(period), keyLastItem, keyItems, keyLatestRun},
		ms(r.now()), period, audience).Int()
	if err != nil {
		return DigestRun{}, false, fmt.Errorf("start digest %s: %w", period, err)
	}
	run, err := r.DigestRun(ctx, period)
	return run, n == 1, err
}

// DigestRun implements Digests.
func (r *Redis) DigestRun(ctx context.Context, period string) (DigestRun, error) {
	f, err := r.rdb.HGetAll(ctx, runKey(period)).Result()
	if err != nil {
		return DigestRun{}, fmt.Errorf("load digest %s: %w", period, err)
	}
	if len(f) == 0 {
		return DigestRun{}, ErrNoRun
	}
	run := DigestRun{
		Period: period, State: f["state"], CreatedAt: msTime(f["created"]), PlannedAt: msTime(f["planned_at"]),
		Items: []Item{},
	}
	n, err := r.bitCounts(ctx, sharedSentSfx(DigestMarkKind, period), outcomeKey(period, OutcomeSkipped), outcomeKey(period, OutcomeFailed))
	if err != nil {
		return DigestRun{}, fmt.Errorf("load digest %s: %w", period, err)
	}
	run.Sent, run.Skipped, run.Failed = n[0], n[1], n[2]
	run.Audience, _ = strconv.ParseInt(f["audience"], 10, 64)
	run.Cursor, _ = strconv.ParseInt(f["cursor"], 10, 64)
	run.Planned, _ = strconv.ParseInt(f["planned"], 10, 64)
	run.Bounces, _ = strconv.ParseInt(f["bounces"], 10, 64)
	run.Complaints, _ = strconv.ParseInt(f["complaints"], 10, 64)
	run.AsIssue = f["as_issue"] == "1"
	run.Issue, _ = strconv.ParseInt(f["issue"], 10, 64)
	if run.Issue > 0 {
		prog, err := r.IssueProgress(ctx, run.Issue)
		if err != nil {
			return DigestRun{}, fmt.Errorf("load digest %s: %w", period, err)
		}
		run = run.WithIssue(prog)
	}
	run = run.WithRates()
	if f["items"] != "" {
		if run.Items, err = r.items(ctx, strings.Split(f["items"], ",")); err != nil {
			return DigestRun{}, err
		}
	}
	return run, nil
}

// DigestItems implements Digests: the run's item list and the items, two
// round trips, whatever the list's size.
func (r *Redis) DigestItems(ctx context.Context, period string) ([]Item, error) {
	f, err := r.rdb.HMGet(ctx, runKey(period), "items", "created").Result()
	if err != nil {
		return nil, fmt.Errorf("load digest %s: %w", period, err)
	}
	if f[1] == nil {
		return nil, ErrNoRun // every run has its creation time
	}
	ids, _ := f[0].(string)
	if ids == "" {
		return []Item{}, nil
	}
	return r.items(ctx, strings.Split(ids, ","))
}

func (r *Redis) items(ctx context.Context, ids []string) ([]Item, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, itemKey(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load items: %w", err)
	}
	out := make([]Item, 0, len(ids))
	for i, c := range cmds {
		f := c.Val()
		if len(f) == 0 {
			continue
		}
		id, _ := strconv.ParseInt(ids[i], 10, 64)
		topic := f["tp"]
		if topic == "" {
			topic = topics.Digest // stored before items had topics
		}
		out = append(out, Item{ID: id, Title: f["t"], URL: f["u"], Summary: f["s"], Topic: topic, PublishedAt: msTime(f["p"])})
	}
	return out, nil
}

// LatestDigestPeriod implements Digests.
func (r *Redis) LatestDigestPeriod(ctx context.Context) (string, error) {
	p, err := r.rdb.Get(ctx, keyLatestRun).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return p, wrapErr("latest digest", err)
}

// advanceRunScript saves the planner's progress after a page, once: a page
// whose cursor is not past the saved one was counted already (the planner
// sent it again after a lost answer, or a second planner ran it), and only
// its done flag still counts.
//
//	KEYS[1]  prefixRun .. period   the run hash
//	ARGV[1]  cursor (the page's last id)
//	ARGV[2]  recipients in the page
//	ARGV[3]  RunPlanned when planning is done, else ""
//	ARGV[4]  now, unix ms
//
// Writes the run hash's cursor, planned and, when done, state and
// planned_at.
var advanceRunScript = redis.NewScript(`
if tonumber(ARGV[1]) > tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0') then
  redis.call('HSET', KEYS[1], 'cursor', ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'planned', ARGV[2])
end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'state', ARGV[3], 'planned_at', ARGV[4])
end
return 1
`)

// AdvanceDigestRun implements Digests.
func (r *Redis) AdvanceDigestRun(ctx context.Context, period string, cursor int64, n int, done bool) error {
	state := ""
	if done {
		state = RunPlanned
	}
	err := advanceRunScript.Run(ctx, r.rdb, []string{runKey(period)}, cursor, n, state, ms(r.now())).Err()
	return wrapErr("advance digest "+period, err)
}
