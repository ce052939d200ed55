package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/tasks"
)

// ListJobRunner runs the list's bulk actions (subscribers:bulk) and CSV
// exports (export:run) through listjobs.Runner: a store error is retried
// from the cursor saved; the last retry ends the job as failed.
type ListJobRunner struct {
	Runner *listjobs.Runner
}

// HandleListJob runs one job.
func (h *ListJobRunner) HandleListJob(ctx context.Context, p tasks.ListJobPayload) error {
	err := h.Runner.Run(ctx, p.ID)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, listjobs.ErrNoJob):
		return fmt.Errorf("list job %s: %w: %w", p.ID, err, asynq.SkipRetry)
	case lastTry(ctx):
		if ferr := h.Runner.Fail(context.WithoutCancel(ctx), p.ID, err); ferr != nil {
			return ferr
		}
		return fmt.Errorf("list job %s: %w: %w", p.ID, err, asynq.SkipRetry)
	}
	if ctx.Err() == nil {
		h.Runner.Note(context.WithoutCancel(ctx), p.ID, err)
	}
	return fmt.Errorf("list job %s (resumes from its cursor): %w", p.ID, err)
}
