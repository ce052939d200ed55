package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/tasks"
)

// waitingOutRedis is the middleware, in every lane before all else that
// reaches Redis (a lane's pace, the handler), that makes every Redis
// command of a task wait out a Redis that cannot be reached, for up to
// w.For each (redisconn.WaitOut), rather than fail at once: a task that
// gave up would hand itself back to an asynq that cannot record it either
// (redisconn.DefaultWait). The one place a task opts in; what a handler
// runs past its task's end (marks written after a cancel) keeps the
// opt-in with context.WithoutCancel, and the mark writer, which runs for
// no task, opts in itself.
//
// Only a command that did not reach Redis is sent again
// (redisconn.Hold), so any step of any task may wait.
func waitingOutRedis(w redisconn.Wait) asynq.MiddlewareFunc {
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			return next.ProcessTask(redisconn.WaitOut(ctx, w), t)
		})
	}
}

// enqueueOnce queues task. Every task the worker queues has a TaskID, and
// asynq.ErrTaskIDConflict means an earlier attempt (a send go-redis tried
// again after its answer was lost, or an earlier run of the handler)
// queued it: success, not an error.
func enqueueOnce(ctx context.Context, q tasks.Enqueuer, task *asynq.Task, opts ...asynq.Option) error {
	if _, err := q.EnqueueContext(ctx, task, opts...); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue %s: %w", task.Type(), err)
	}
	return nil
}
