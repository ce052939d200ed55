package main

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/tasks"
)

// refuseOlderDigestRuns stops every role and tool at start-up while the
// data holds a digest run an earlier version began and has not finished,
// and a task of that run is still in the queue: that run goes out as
// email:digest batches, which this version no longer sends, so starting
// would leave the rest of the run's readers without their week. The one
// line says the way out. A run whose counts say unfinished but whose
// tasks are all gone (a dead batch the operator deleted) cannot go on
// under any version: it is logged and taken as ended, so it never blocks
// start-up for good.
func refuseOlderDigestRuns(ctx context.Context, a *app) error {
	periods, err := a.store.OlderDigestRuns(ctx)
	if err != nil {
		return fmt.Errorf("redis layout: %w", err)
	}
	for _, p := range periods {
		queued, err := olderDigestTasks(ctx, a.rdb, p)
		if err != nil {
			return fmt.Errorf("redis layout: look for the tasks of digest run %s: %w", p, err)
		}
		if queued {
			return fmt.Errorf("digest run %s was begun by an earlier version and still has tasks in the %s queue: let the previous release finish them (progress: GET /api/digests/%s; a dead one can be deleted in /monitoring), then start this one", p, tasks.QueueCritical, p)
		}
		a.log.Warn("digest: a run an earlier version began counts fewer mails than it planned, but none of its tasks is left: it is taken as ended", "period", p)
	}
	return nil
}

// olderDigestTasks tells whether a task of period's older run is still in
// the queue, in any state (pending, scheduled, retry, active or archived):
// its plan (TaskID digest:<period>) or a batch (digest:<period>:<first
// id>). asynq keeps each task as the hash asynq:{<queue>}:t:<TaskID>, so
// the plan is one EXISTS and the batches one SCAN for their names; this
// runs only when such a run was found, once at start-up.
func olderDigestTasks(ctx context.Context, rdb redis.UniversalClient, period string) (bool, error) {
	prefix := "asynq:{" + tasks.QueueCritical + "}:t:" + tasks.DigestPlanTaskID(period)
	n, err := rdb.Exists(ctx, prefix).Result()
	if err != nil || n > 0 {
		return n > 0, err
	}
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	if iter.Next(ctx) {
		return true, nil
	}
	return false, iter.Err()
}
