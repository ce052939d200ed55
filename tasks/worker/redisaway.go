package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// DefaultRedisWait is how long a task's Redis step (pacing, claims, marks,
// the re-read, a schedule) waits for a Redis that cannot be reached before
// it gives up: longer than a restart or a Sentinel failover takes, and
// shorter than asynq's lease on the task (30 s from its last heartbeat, and
// the heartbeats stop with Redis).
//
// A task that gave up at once used to hand itself back to asynq while
// asynq could not record that either: the hand-back was lost, and the task
// ran again only when asynq's recoverer found its lease expired, a minute
// or two after Redis was back. Waiting in place, the task carries on within
// a second of Redis coming back, holding its claims and its place in the
// send rate; asynq renews its lease at the next heartbeat.
const DefaultRedisWait = 30 * time.Second

// redisWait is how one component waits out an unreachable Redis.
type redisWait struct {
	// For bounds the wait (DefaultRedisWait when zero).
	For time.Duration
	Log *slog.Logger
}

// awaitRedis runs op and, while it fails because Redis cannot be reached
// (store.Unavailable), runs it again, backing off from 50 ms to 1 s, until
// w.For has passed or ctx is done; it then returns op's last result. Every
// op it runs must be safe to run twice: a command that reached Redis just
// before the connection broke is sent again. what names the step in the
// log.
func awaitRedis[T any](ctx context.Context, w redisWait, what string, op func(context.Context) (T, error)) (T, error) {
	bound := w.For
	if bound <= 0 {
		bound = DefaultRedisWait
	}
	giveUp := time.Now().Add(bound)
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		v, err := op(ctx)
		if err == nil && attempt > 1 {
			w.log().Info("Redis is back: "+what+" goes on", "attempts", attempt)
		}
		if err == nil || !store.Unavailable(err) || ctx.Err() != nil || time.Now().Add(wait).After(giveUp) {
			if err != nil && attempt > 1 {
				w.log().Warn("Redis still away: "+what+" gives up", "attempts", attempt, "err", err)
			}
			return v, err
		}
		if attempt == 1 {
			w.log().Warn("Redis away: "+what+" waits for it", "up_to", bound, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// untilRedis is awaitRedis for an op with no result.
func untilRedis(ctx context.Context, w redisWait, what string, op func(context.Context) error) error {
	_, err := awaitRedis(ctx, w, what, func(ctx context.Context) (struct{}, error) { return struct{}{}, op(ctx) })
	return err
}

// enqueueOnce queues task on q, waiting out an unreachable Redis as
// awaitRedis does. Every task the worker queues has a TaskID, so sending
// it again after an answer lost with the connection is safe, and the
// asynq.ErrTaskIDConflict it then gets means an earlier attempt (or an
// earlier run of the handler) queued it: success, not an error.
func enqueueOnce(ctx context.Context, w redisWait, q tasks.Enqueuer, task *asynq.Task, opts ...asynq.Option) error {
	_, err := awaitRedis(ctx, w, "enqueue of "+task.Type(), func(ctx context.Context) (*asynq.TaskInfo, error) {
		return q.EnqueueContext(ctx, task, opts...)
	})
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue %s: %w", task.Type(), err)
	}
	return nil
}

func (w redisWait) log() *slog.Logger {
	if w.Log != nil {
		return w.Log
	}
	return slog.Default()
}
