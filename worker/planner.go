package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Bulk planning defaults (the issue sender's: the digest is sent as an
// issue); zero values in Deps take these.
const (
	DefaultDigestBatch       = 100
	DefaultMaxPendingBatches = 50
	// planWaitLimit is how long a planner waits in place for room in the
	// queue before handing itself back to it (cursor saved).
	planWaitLimit = 30 * time.Second
)

// PlanStore is what the planner needs of the store.
type PlanStore interface {
	StartDigestRun(ctx context.Context, period string) (run store.DigestRun, created bool, err error)
}

// DigestIssueStore is what sending the digest as an issue needs of the
// store: the run's issue, made once, and its send.
type DigestIssueStore interface {
	DigestIssue(ctx context.Context, period string, c store.IssueContent) (store.Issue, error)
	TransitionIssue(ctx context.Context, id int64, from []string, to string, ch store.IssueChange) (store.Issue, error)
	tasks.OutboxCleaner
}

// Planner handles digest:plan. A run sends its items as an issue (slug
// digest-<period>) that the issue sender plans and sends: one path, one
// set of marks, progress and archive for the digest and the publisher's
// issues. (A run an older version began, walked into email:digest
// batches, is no longer sent here: start-up refuses data that still has
// one under way, store.OlderDigestRuns.)
type Planner struct {
	Store PlanStore
	// Issues and Render make the run's issue.
	Issues DigestIssueStore
	Render *mailer.Renderer
	Now    func() time.Time
	Queue  tasks.Enqueuer
	Log    *slog.Logger
	// BulkReady, when set, may hold a period's digest (no postal address
	// saved yet): the plan fails before anything is recorded, and asynq's
	// retries run it again, so the digest goes out once it is allowed.
	BulkReady func(ctx context.Context) error
}

// HandleDigestPlan records the period's run once (three schedulers or a
// manual run during the cron one meet on it) and sends a run still
// planning as its issue. A run planned or empty is left alone, so running
// the period again sends nothing more.
func (h *Planner) HandleDigestPlan(ctx context.Context, p tasks.DigestPlanPayload) error {
	if h.BulkReady != nil {
		if err := h.BulkReady(ctx); err != nil {
			h.Log.Error("digest: held", "period", p.Period, "err", err)
			return fmt.Errorf("digest %s: %w", p.Period, err)
		}
	}
	run, created, err := h.Store.StartDigestRun(ctx, p.Period)
	if err != nil {
		return err
	}
	if created {
		h.Log.Info("digest: run started", "period", p.Period, "items", len(run.Items), "audience", run.Audience)
	}
	if run.State != store.RunPlanning {
		h.Log.Info("digest: nothing to plan", "period", p.Period, "state", run.State)
		return nil
	}
	if !run.AsIssue {
		// An earlier version began this run as email:digest batches and
		// marked its readers under the digest's marks, not an issue's:
		// sending it as an issue now would mail them the week again.
		// Start-up refuses while its tasks are queued; one whose tasks are
		// gone stays as it ended.
		h.Log.Warn("digest: a run an earlier version began is not sent again as an issue", "period", p.Period)
		return nil
	}
	if h.Render == nil {
		return fmt.Errorf("digest %s: this worker has no mail renderer: %w", p.Period, asynq.SkipRetry)
	}
	return h.sendAsIssue(ctx, run)
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

// sendAsIssue makes the run's issue from its items and sends it now.
// Each step is safe to run again: the store makes the issue once per run
// (in the step that links it, so a crash right after leaves it to this
// retry, not to a second issue); the send is a transition from draft
// that only one caller wins, written with its plan's outbox entry; the
// plan's TaskID makes a second enqueue a conflict. An issue a publisher
// paused or cancelled meanwhile is left as it is.
func (h *Planner) sendAsIssue(ctx context.Context, run store.DigestRun) error {
	subject, body, err := h.Render.DigestIssue(run.Period, entriesOf(run.Items))
	if err != nil {
		return fmt.Errorf("digest %s: %v: %w", run.Period, err, asynq.SkipRetry)
	}
	content := store.IssueContent{Subject: subject, Body: body, Topics: []string{topics.Digest}}
	is, err := h.Issues.DigestIssue(ctx, run.Period, content)
	if err != nil {
		return err
	}
	if is.Status == store.IssueDraft {
		job := tasks.NewIssuePlan(is.ID, is.Round, h.Now())
		sent, err := h.Issues.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending,
			store.IssueChange{Outbox: job.Outbox(), Round: is.Round})
		switch {
		case (errors.Is(err, store.ErrIssueState) || errors.Is(err, store.ErrIssueStale)):
			// Sent already: by another planner of the period, or by
			// this one before an answer was lost. Read where it is.
			sent, err = h.Issues.DigestIssue(ctx, run.Period, content)
			if err != nil {
				return err
			}
		case err != nil:
			return err
		}
		is = sent
	}
	if is.Status != store.IssueSending {
		h.Log.Info("digest: its issue is not sending; left as it is", "period", run.Period, "issue", is.ID, "status", is.Status)
		return nil
	}
	// The outbox entry would do (the relay), but at once is better; a
	// plan queued or done already makes this a conflict or a no-op.
	_, err = tasks.Dispatch(ctx, h.Queue, h.Issues, tasks.NewIssuePlan(is.ID, is.Round, h.Now()))
	if err != nil && !errors.Is(err, tasks.ErrOutboxLeft) {
		return err
	}
	h.Log.Info("digest: sent as an issue", "period", run.Period, "issue", is.ID, "slug", is.Slug, "items", len(run.Items))
	return nil
}

// backPressure holds an issue's planner (the digest's too) while the
// critical queue holds limit or more waiting tasks, so Redis holds the
// batches in flight, not the whole audience.
type backPressure struct {
	depth QueueDepth // nil: no back pressure
	limit int
}

// wait returns once the queue has room, waiting in place up to
// planWaitLimit; longer, the planner hands itself back to the queue (its
// cursor is saved) as Deferred.
func (b backPressure) wait(ctx context.Context) error {
	if b.depth == nil {
		return nil
	}
	deadline := time.Now().Add(planWaitLimit)
	for {
		pending, err := b.depth.Pending(ctx, tasks.QueueCritical)
		if err != nil {
			if ctx.Err() != nil {
				// The task's time ran out while it waited: hand it back
				// (its cursor is saved), as the wait below would.
				return &Deferred{Reason: "critical queue is full", In: 5 * time.Second}
			}
			return err
		}
		if pending < b.limit {
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
