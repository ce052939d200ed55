package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/tasks"
)

// Observe is the middleware that writes one log line and the task metrics
// for every task run, labelled with the lane of the task's queue.
func Observe(log *slog.Logger, m *Metrics) asynq.MiddlewareFunc {
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			start := time.Now()
			err := next.ProcessTask(ctx, t)
			took := time.Since(start)
			id, _ := asynq.GetTaskID(ctx)
			queue, _ := asynq.GetQueueName(ctx)
			retried, _ := asynq.GetRetryCount(ctx)
			maxRetry, known := asynq.GetMaxRetry(ctx)
			if !known {
				maxRetry = retried + 1 // outside asynq: no limit to have reached
			}
			result := taskResult(err, retried, maxRetry)
			lane := tasks.LaneOf(queue)
			if m != nil {
				m.Tasks.WithLabelValues(lane, t.Type(), queue, result).Inc()
				m.TaskDuration.WithLabelValues(lane, t.Type(), queue).Observe(took.Seconds())
				if result == "archived" {
					m.Archived.WithLabelValues(lane, t.Type(), queue, archiveCause(err)).Inc()
				}
			}
			level := slog.LevelInfo
			if result == "retry" || result == "archived" {
				level = slog.LevelWarn
			}
			attrs := []any{"type", t.Type(), "id", id, "lane", lane, "queue", queue, "retry", retried,
				"duration_ms", took.Milliseconds(), "result", result}
			if err != nil {
				attrs = append(attrs, "err", err.Error())
			}
			log.Log(ctx, level, "task", attrs...)
			return err
		})
	}
}

func taskResult(err error, retried, maxRetry int) string {
	switch {
	case err == nil:
		return "success"
	case !IsFailure(err):
		return "deferred"
	case errors.Is(err, asynq.SkipRetry), retried >= maxRetry:
		return "archived"
	}
	return "retry"
}
