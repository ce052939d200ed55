package tasks

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
)

// QueueInspector reports a queue's depth (*asynq.Inspector).
type QueueInspector interface {
	GetQueueInfo(queue string) (*asynq.QueueInfo, error)
}

// Digest settings; zero values take these defaults.
const (
	DefaultDigestBatch       = 100
	DefaultMaxPendingBatches = 50
	// planWaitLimit is how long the planner waits in place for room in the
	// queue before handing itself back to it (cursor saved).
	planWaitLimit = 30 * time.Second
)

// EnqueueDigestPlan starts period's digest. A TaskID conflict (the plan is
// already queued or running) is not an error: duplicate is true.
func EnqueueDigestPlan(ctx context.Context, q Enqueuer, period string) (duplicate bool, err error) {
	if !ValidPeriod(period) {
		return false, fmt.Errorf("period %q: want 1-64 letters, digits, '-', '_' or '.'", period)
	}
	_, err = q.EnqueueContext(ctx, NewDigestPlan(period))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return true, nil
	}
	return false, err
}

// HandleDigestPlan walks the active subscribers by id in pages and enqueues
// one batch task per page. The run record is created once per period, so
// three schedulers or a manual run during the cron one plan it once; the
// cursor is saved after each page, so a killed planner resumes where it
// stopped, and a page planned twice is a TaskID conflict or, if that batch
// already finished, a batch whose delivery marks say "sent".
func (h *Handlers) HandleDigestPlan(ctx context.Context, t *asynq.Task) error {
	var p DigestPlanPayload
	if err := decode(t, &p); err != nil {
		return err
	}
	if !ValidPeriod(p.Period) {
		return errMissing(t, "valid period")
	}
	run, created, err := h.Store.StartDigestRun(ctx, p.Period)
	if err != nil {
		return err
	}
	if created {
		h.log().Info("digest: run started", "period", p.Period, "items", len(run.Items), "audience", run.Audience)
	}
	if run.State != store.RunPlanning {
		h.log().Info("digest: nothing to plan", "period", p.Period, "state", run.State)
		return nil
	}
	size := h.DigestBatch
	if size <= 0 {
		size = DefaultDigestBatch
	}
	cursor := run.Cursor
	for {
		if err := h.waitForRoom(ctx); err != nil {
			return err
		}
		ids, err := h.Store.ActiveAfter(ctx, cursor, size)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			h.log().Info("digest: planned", "period", p.Period, "cursor", cursor)
			return h.Store.AdvanceDigestRun(ctx, p.Period, cursor, 0, true)
		}
		if _, err := h.Queue.EnqueueContext(ctx, NewDigestBatch(p.Period, ids)); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
			return fmt.Errorf("enqueue digest batch: %w", err)
		}
		cursor = ids[len(ids)-1]
		if err := h.Store.AdvanceDigestRun(ctx, p.Period, cursor, len(ids), false); err != nil {
			return err
		}
	}
}

// waitForRoom is the planner's back pressure: while the critical queue
// holds MaxPendingBatches or more waiting tasks it waits, so Redis holds the
// batches in flight, not the whole audience.
func (h *Handlers) waitForRoom(ctx context.Context) error {
	if h.Depth == nil {
		return nil
	}
	limit := h.MaxPendingBatches
	if limit <= 0 {
		limit = DefaultMaxPendingBatches
	}
	deadline := time.Now().Add(planWaitLimit)
	for {
		info, err := h.Depth.GetQueueInfo(QueueCritical)
		// A queue nobody used yet does not exist; asynq v0.26 reports it
		// with an internal NOT_FOUND error rather than ErrQueueNotFound.
		if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) && !strings.Contains(err.Error(), "NOT_FOUND") {
			return fmt.Errorf("queue depth: %w", err)
		}
		if info == nil || info.Pending < limit {
			return nil
		}
		if time.Now().After(deadline) {
			return &Deferred{Reason: "critical queue is full", In: 5 * time.Second}
		}
		select {
		case <-ctx.Done():
			return &Deferred{Reason: "critical queue is full", In: 5 * time.Second}
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// HandleDigestBatch sends the period's digest to each recipient of the
// batch over one SMTP connection. A recipient who is no longer active is
// skipped; one inside quiet hours moves to a batch of its own due when they
// end. Each mail claims its mark first, so a retried batch sends only to
// the rest; a temporary failure for one recipient does not hold the others
// and retries the batch at the end.
func (h *Handlers) HandleDigestBatch(ctx context.Context, t *asynq.Task) error {
	var p DigestBatchPayload
	if err := decode(t, &p); err != nil {
		return err
	}
	if !ValidPeriod(p.Period) || len(p.IDs) == 0 {
		return errMissing(t, "period and recipients")
	}
	entries, err := h.digestEntries(ctx, p.Period)
	if err != nil {
		return err
	}
	subs, err := h.Store.SubscribersByID(ctx, p.IDs)
	if err != nil {
		return err
	}
	now := h.now()
	var skipped []int64
	var recipients []store.Subscriber
	quiet := map[time.Time][]int64{}
	for i, s := range subs {
		switch until := h.quiet().until(s.Timezone, now); {
		case s.ID == 0 || s.Status != store.Active:
			skipped = append(skipped, p.IDs[i])
		case !until.IsZero():
			quiet[until] = append(quiet[until], s.ID)
		default:
			recipients = append(recipients, s)
		}
	}
	if len(skipped) > 0 {
		if err := h.Store.SetOutcome(ctx, p.Period, store.OutcomeSkipped, skipped...); err != nil {
			return err
		}
	}
	if err := h.deferQuiet(ctx, p.Period, quiet); err != nil {
		return err
	}
	if len(recipients) == 0 {
		return nil
	}
	return h.sendBatch(ctx, p.Period, entries, recipients)
}

func (h *Handlers) deferQuiet(ctx context.Context, period string, quiet map[time.Time][]int64) error {
	for until, ids := range quiet {
		task := NewDigestBatch(period, ids, asynq.ProcessAt(until),
			asynq.TaskID(fmt.Sprintf("digest:%s:q%d:%d", period, until.Unix(), ids[0])))
		if _, err := h.Queue.EnqueueContext(ctx, task); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
			return fmt.Errorf("defer quiet recipients: %w", err)
		}
		h.log().Info("digest: quiet hours", "period", period, "recipients", len(ids), "until", until.UTC())
	}
	return nil
}

func (h *Handlers) sendBatch(ctx context.Context, period string, entries []mailer.Entry, recipients []store.Subscriber) error {
	marks := make([]store.Mark, len(recipients))
	for i, s := range recipients {
		marks[i] = store.Mark{Kind: mailer.KindDigest, Key: period, SubscriberID: s.ID, Shared: true}
	}
	claims, err := h.Store.ClaimMarks(ctx, marks, h.claimTTL())
	if err != nil {
		return err
	}
	var m mailer.Mailer = h.Mailer
	if o, ok := h.Mailer.(mailer.Opener); ok {
		sess, err := o.Open(ctx)
		if err != nil {
			h.Store.ReleaseMarks(ctx, claimed(marks, claims, 0))
			return err
		}
		defer sess.Close()
		m = sess
	}
	p := h.newPacer(ctx)
	// The claims were taken up front; stop well before they could expire
	// under a slow gateway, and let a fresh run claim the rest.
	stopAt := time.Now().Add(h.claimTTL() / 2)
	var retryErr error
	for i, s := range recipients {
		if time.Now().After(stopAt) {
			h.Store.ReleaseMarks(ctx, claimed(marks, claims, i))
			return cmpErr(retryErr, &Deferred{Reason: "batch ran for half its claim time", In: time.Second})
		}
		switch claims[i] {
		case store.AlreadySent:
			continue
		case store.Busy:
			retryErr = cmpErr(retryErr, fmt.Errorf("digest to subscriber %d: %w", s.ID, ErrDeliveryBusy))
			continue
		}
		domain := address.Domain(s.Email)
		pause, err := p.domainPause(ctx, domain)
		if err == nil && pause > 0 && !p.last {
			// This receiver asked us to slow down: leave its recipients
			// for the retry and carry on with the others.
			h.Store.ReleaseMark(ctx, marks[i])
			retryErr = cmpErr(retryErr, &Deferred{Reason: "receiver " + domain + " asked us to slow down", In: pause})
			continue
		}
		if err == nil {
			err = p.wait(ctx, domain, true, len(recipients)-i)
		}
		if err != nil {
			// Hand the rest back; the retry sends only to them.
			h.Store.ReleaseMarks(ctx, claimed(marks, claims, i))
			return err
		}
		err = h.send(ctx, m, s, marks[i], mailer.Data{
			Email: s.Email, Name: s.Name, Period: period, Entries: entries, UnsubscribeURL: h.Links.Unsubscribe(s.Email),
		})
		switch se := mailer.AsSendError(err); {
		case err == nil:
		case errors.Is(err, asynq.SkipRetry):
			h.Store.SetOutcome(ctx, period, store.OutcomeFailed, s.ID)
		default:
			if se != nil && se.Class == mailer.Throttled {
				p.domains[domain] = max(h.Throttle, time.Second)
			}
			retryErr = cmpErr(retryErr, err)
		}
	}
	return retryErr
}

// cmpErr keeps the first error that should retry the batch.
func cmpErr(kept, err error) error {
	if kept != nil {
		return kept
	}
	return err
}

// claimed lists the marks from index from on that this run holds.
func claimed(marks []store.Mark, claims []store.Claim, from int) []store.Mark {
	var out []store.Mark
	for i := from; i < len(marks); i++ {
		if claims[i] == store.Claimed {
			out = append(out, marks[i])
		}
	}
	return out
}

// digestEntries returns a period's items as mail entries, cached: a run's
// items never change once it started.
func (h *Handlers) digestEntries(ctx context.Context, period string) ([]mailer.Entry, error) {
	h.entriesMu.Lock()
	defer h.entriesMu.Unlock()
	if e, ok := h.entries[period]; ok {
		return e, nil
	}
	run, err := h.Store.DigestRun(ctx, period)
	if errors.Is(err, store.ErrNoRun) {
		return nil, fmt.Errorf("digest %s has no run record: %w", period, asynq.SkipRetry)
	}
	if err != nil {
		return nil, err
	}
	sort.Slice(run.Items, func(i, j int) bool { return run.Items[i].ID < run.Items[j].ID })
	entries := make([]mailer.Entry, len(run.Items))
	for i, it := range run.Items {
		entries[i] = mailer.Entry{Title: it.Title, URL: it.URL, Summary: it.Summary}
	}
	if h.entries == nil || len(h.entries) > 16 {
		h.entries = map[string][]mailer.Entry{}
	}
	h.entries[period] = entries
	return entries, nil
}
