package worker

import (
	"context"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/tasks"
)

// runTask is task t handled by fn as the worker runs it: its payload decoded
// and checked by kind k first (on).
func runTask[P any](ctx context.Context, k tasks.Kind[P], fn func(context.Context, P) error, t *asynq.Task) error {
	return on(k, fn).handler.ProcessTask(ctx, t)
}
