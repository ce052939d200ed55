package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// BatchStore is what the batch sender needs of the store.
type BatchStore interface {
	DigestRun(ctx context.Context, period string) (store.DigestRun, error)
	SubscribersByID(ctx context.Context, ids []int64) ([]store.Subscriber, error)
	SetOutcome(ctx context.Context, period, outcome string, ids ...int64) error
}

// BatchSender handles email:digest: one period's digest to a batch of
// recipients.
type BatchSender struct {
	Store   BatchStore
	Deliver *Deliverer
	// Queue takes the part of a batch held by quiet hours.
	Queue tasks.Enqueuer
	Links Links
	Quiet *quiet.Hours
	Now   func() time.Time
	Log   *slog.Logger

	entriesMu sync.Mutex
	entries   map[string][]mailer.Entry
	prepared  map[string]*mailer.Prepared
}

// awaited is the batch's store and queue waiting out an unreachable Redis
// as long as its delivery does.
func (h *BatchSender) awaited() awaitBatch {
	return awaitBatch{awaitQueue: awaitQueue{q: h.Queue, w: h.Deliver.away()}, s: h.Store}
}

// HandleDigestBatch sends the period's digest to each recipient of the
// batch over one SMTP connection. A recipient who is no longer active is
// skipped; one inside quiet hours moves to a batch of its own due when they
// end. Each mail claims its mark first, so a retried batch sends only to
// the rest; a temporary failure for one recipient does not hold the others
// and retries the batch at the end.
func (h *BatchSender) HandleDigestBatch(ctx context.Context, p tasks.DigestBatchPayload) error {
	entries, err := h.digestEntries(ctx, p.Period)
	if err != nil {
		return err
	}
	// The re-read of the whole batch, in one round trip.
	subs, err := h.awaited().SubscribersByID(ctx, p.IDs)
	if err != nil {
		return err
	}
	// The items are the same for every recipient: render them once.
	stream := h.Links.Stream(topics.Digest)
	prep, err := h.prepare(p.Period, stream, entries)
	if err != nil {
		return fmt.Errorf("prepare digest: %v: %w", err, asynq.SkipRetry)
	}
	now := h.Now()
	var skipped []int64
	var mails []Mail
	held := map[time.Time][]int64{}
	for i, s := range subs {
		switch until := h.Quiet.Until(s.Timezone, now); {
		case s.ID == 0 || s.Status != store.Active || !slices.Contains(s.Topics, topics.Digest):
			// Left, or turned the digest off, since the planner saw them.
			skipped = append(skipped, p.IDs[i])
		case !until.IsZero():
			held[until] = append(held[until], s.ID)
		default:
			mails = append(mails, Mail{
				To:       s,
				Mark:     store.Mark{Kind: mailer.KindDigest, Key: p.Period, SubscriberID: s.ID, Shared: true},
				Data:     h.Links.To(stream, s, topics.Digest),
				Prepared: prep,
			})
		}
	}
	if len(skipped) > 0 {
		if err := h.setOutcome(ctx, p.Period, store.OutcomeSkipped, skipped); err != nil {
			return err
		}
	}
	if err := h.deferQuiet(ctx, p.Period, held); err != nil {
		return err
	}
	if len(mails) == 0 {
		return nil
	}
	failed, retry := h.Deliver.Deliver(ctx, mails)
	if len(failed) > 0 {
		ids := make([]int64, len(failed))
		for i, f := range failed {
			ids[i] = f.SubscriberID
		}
		if err := h.setOutcome(ctx, p.Period, store.OutcomeFailed, ids); err != nil {
			// The retry finds these marks unsent and their subscribers
			// bounced (skipped) or fails them again: the count catches up.
			return firstErr(retry, fmt.Errorf("record %d failed recipients: %w", len(ids), err))
		}
	}
	return retry
}

// setOutcome records recipients' outcome, waiting out a Redis outage (a
// bitmap: recording twice is recording once).
func (h *BatchSender) setOutcome(ctx context.Context, period, outcome string, ids []int64) error {
	return h.awaited().SetOutcome(ctx, period, outcome, ids...)
}

func (h *BatchSender) deferQuiet(ctx context.Context, period string, held map[time.Time][]int64) error {
	for until, ids := range held {
		if err := h.awaited().Enqueue(ctx, tasks.NewQuietDigestBatch(period, ids, until)); err != nil {
			return fmt.Errorf("defer quiet recipients: %w", err)
		}
		h.Log.Info("digest: quiet hours", "period", period, "recipients", len(ids), "until", until.UTC())
	}
	return nil
}

// entriesOf is a run's items as mail entries, in the order they were
// added.
func entriesOf(items []store.Item) []mailer.Entry {
	items = slices.Clone(items)
	sort.Slice(items, func(i, j int) bool { return items[i].ID < items[j].ID })
	entries := make([]mailer.Entry, len(items))
	for i, it := range items {
		entries[i] = mailer.Entry{Title: it.Title, URL: it.URL, Summary: it.Summary}
	}
	return entries
}

// prepare returns the period's digest prepared for its readers, shared by
// all the worker's batches of the period: each shape of mail is rendered,
// checked against the full render and encoded once per worker, not once
// per batch (7 % of the worker's CPU in a profile of bench-digest).
func (h *BatchSender) prepare(period string, stream mailer.Data, entries []mailer.Entry) (*mailer.Prepared, error) {
	h.entriesMu.Lock()
	defer h.entriesMu.Unlock()
	if p, ok := h.prepared[period]; ok {
		return p, nil
	}
	shared := stream
	shared.Period, shared.Entries = period, entries
	p, err := h.Deliver.Render.Prepare(mailer.KindDigest, shared)
	if err != nil {
		return nil, err
	}
	if h.prepared == nil || len(h.prepared) > 16 {
		h.prepared = map[string]*mailer.Prepared{}
	}
	h.prepared[period] = p
	return p, nil
}

// digestEntries returns a period's items as mail entries, cached: a run's
// items never change once it started.
func (h *BatchSender) digestEntries(ctx context.Context, period string) ([]mailer.Entry, error) {
	h.entriesMu.Lock()
	defer h.entriesMu.Unlock()
	if e, ok := h.entries[period]; ok {
		return e, nil
	}
	run, err := h.awaited().DigestRun(ctx, period)
	if errors.Is(err, store.ErrNoRun) {
		return nil, fmt.Errorf("digest %s has no run record: %w", period, asynq.SkipRetry)
	}
	if err != nil {
		return nil, err
	}
	entries := entriesOf(run.Items)
	if h.entries == nil || len(h.entries) > 16 {
		h.entries = map[string][]mailer.Entry{}
	}
	h.entries[period] = entries
	return entries, nil
}
