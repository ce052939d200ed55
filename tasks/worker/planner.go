package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Digest planning defaults; zero values in Planner take these.
const (
	DefaultDigestBatch       = 100
	DefaultMaxPendingBatches = 50
	// planWaitLimit is how long the planner waits in place for room in the
	// queue before handing itself back to it (cursor saved).
	planWaitLimit = 30 * time.Second
)

// PlanStore is what the planner needs of the store.
type PlanStore interface {
	StartDigestRun(ctx context.Context, period string) (run store.DigestRun, created bool, err error)
	AdvanceDigestRun(ctx context.Context, period string, cursor int64, n int, done bool) error
	AudienceAfter(ctx context.Context, topic string, cursor int64, limit int) ([]int64, error)
}

// Planner handles digest:plan: it walks the audience and enqueues batches.
type Planner struct {
	Store PlanStore
	Queue tasks.Enqueuer
	// Depth, when set, is watched for back pressure.
	Depth QueueDepth
	// BatchSize is recipients per batch (DefaultDigestBatch);
	// MaxPendingBatches is how many may wait in the queue before the
	// planner pauses (DefaultMaxPendingBatches).
	BatchSize         int
	MaxPendingBatches int
	Log               *slog.Logger
}

func (h *Planner) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

// HandleDigestPlan walks the active subscribers by id in pages and enqueues
// one batch task per page. The run record is created once per period, so
// three schedulers or a manual run during the cron one plan it once; the
// cursor is saved after each page, so a killed planner resumes where it
// stopped, and a page planned twice is a TaskID conflict or, if that batch
// already finished, a batch whose delivery marks say "sent".
func (h *Planner) HandleDigestPlan(ctx context.Context, t *asynq.Task) error {
	var p tasks.DigestPlanPayload
	if err := decode(t, &p); err != nil {
		return err
	}
	if !tasks.ValidPeriod(p.Period) {
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
	size := h.BatchSize
	if size <= 0 {
		size = DefaultDigestBatch
	}
	cursor := run.Cursor
	for {
		if err := h.waitForRoom(ctx); err != nil {
			return err
		}
		ids, err := h.Store.AudienceAfter(ctx, topics.Digest, cursor, size)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			h.log().Info("digest: planned", "period", p.Period, "cursor", cursor)
			return h.Store.AdvanceDigestRun(ctx, p.Period, cursor, 0, true)
		}
		if _, err := h.Queue.EnqueueContext(ctx, tasks.NewDigestBatch(p.Period, ids)); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
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
func (h *Planner) waitForRoom(ctx context.Context) error {
	if h.Depth == nil {
		return nil
	}
	limit := h.MaxPendingBatches
	if limit <= 0 {
		limit = DefaultMaxPendingBatches
	}
	deadline := time.Now().Add(planWaitLimit)
	for {
		pending, err := h.Depth.Pending(ctx, tasks.QueueCritical)
		if err != nil {
			if ctx.Err() != nil {
				// The task's time ran out while it waited: hand it back
				// (its cursor is saved), as the wait below would.
				return &Deferred{Reason: "critical queue is full", In: 5 * time.Second}
			}
			return err
		}
		if pending < limit {
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
