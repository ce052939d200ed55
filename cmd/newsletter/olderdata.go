package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// olderDigestType is the task type of an earlier version's digest batches
// (email:digest): this version has no handler for it.
const olderDigestType = "email:digest"

// refuseOlderDigestRuns stops every role and tool at start-up while the
// critical queue holds a task only an earlier version can run: one of its
// digest batches (email:digest), or the plan of a digest run it began
// (its run without as_issue), pending, scheduled, waiting for a retry or
// running. Starting would leave those readers without their week (this
// version drops the batches and does not send such a run again), so the
// one line says the way out. Dead (archived) tasks do not count: no
// version runs them on its own.
//
// It lists the critical queue through asynq's Inspector, so it costs what
// that queue holds (batches in flight and those held to a later hour),
// not the whole keyspace.
func refuseOlderDigestRuns(ctx context.Context, a *app) error {
	insp := asynq.NewInspectorFromRedisClient(a.rdb)
	period, err := olderDigestTask(ctx, insp, a.store)
	if err != nil {
		return fmt.Errorf("redis layout: look for an earlier version's digest tasks: %w", err)
	}
	if period == "" {
		return nil
	}
	return fmt.Errorf("digest run %s was begun by an earlier version and still has tasks in the %s queue: let the previous release finish them (progress: GET /api/digests/%s), then start this one", period, tasks.QueueCritical, period)
}

// olderDigestTask is the period of the first task in the critical queue
// that only an earlier version runs ("" when there is none).
func olderDigestTask(ctx context.Context, insp *asynq.Inspector, runs store.Digests) (string, error) {
	lists := []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){
		insp.ListPendingTasks, insp.ListScheduledTasks, insp.ListRetryTasks, insp.ListActiveTasks,
	}
	for _, list := range lists {
		for page := 1; ; page++ {
			infos, err := list(tasks.QueueCritical, asynq.PageSize(1000), asynq.Page(page))
			if errors.Is(err, asynq.ErrQueueNotFound) {
				return "", nil // nothing was ever queued there
			}
			if err != nil {
				return "", err
			}
			for _, ti := range infos {
				if period, err := olderPeriod(ctx, ti, runs); period != "" || err != nil {
					return period, err
				}
			}
			if len(infos) < 1000 {
				break
			}
		}
	}
	return "", nil
}

// olderPeriod is the period of ti when it is an earlier version's digest
// batch or the plan of a run that version began, else "".
func olderPeriod(ctx context.Context, ti *asynq.TaskInfo, runs store.Digests) (string, error) {
	var p struct {
		Period string `json:"period"`
	}
	switch ti.Type {
	case olderDigestType:
		if err := json.Unmarshal(ti.Payload, &p); err != nil || p.Period == "" {
			return "(unreadable)", nil
		}
		return p.Period, nil
	case tasks.TypeDigestPlan:
		if err := json.Unmarshal(ti.Payload, &p); err != nil || p.Period == "" {
			return "", nil // this version's handler drops it
		}
		run, err := runs.DigestRun(ctx, p.Period)
		if errors.Is(err, store.ErrNoRun) {
			return "", nil // not begun yet: this version begins it
		}
		if err != nil {
			return "", err
		}
		if !run.AsIssue && run.State == store.RunPlanning {
			return p.Period, nil
		}
	}
	return "", nil
}
