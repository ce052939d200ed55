// Package schedule fires the weekly digest: the scheduler role. It lives
// apart from tasks so that producers (the API) do not depend on cron.
package schedule

import (
	"context"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/newsletter/newsletter/tasks"
)

// Scheduler enqueues the digest plan on NEWSLETTER_DIGEST_CRON (UTC).
//
// It is not asynq's Scheduler: that one enqueues a task fixed when it was
// registered, and the plan's TaskID must name the period it fires in
// ("digest:2026-W49"). Like asynq's it has no leader election: every
// replica fires, they all meet on that TaskID, and a replica that fires
// after the plan finished finds the period's run record and plans nothing.
type Scheduler struct {
	// Schedule is the parsed NEWSLETTER_DIGEST_CRON (cron.ParseStandard).
	Schedule cron.Schedule
	Queue    tasks.Enqueuer
	Log      *slog.Logger
	// Now is the clock (the period is the ISO week of the firing time).
	Now func() time.Time
	// FeedsInterval (NEWSLETTER_FEEDS_INTERVAL), when above 0, also
	// enqueues a feeds poll at the start of each slot of that width; set
	// it only when the topics file names feeds.
	FeedsInterval time.Duration

	cron *cron.Cron
}

// Start begins firing.
func (s *Scheduler) Start() {
	s.cron = cron.New(cron.WithLocation(time.UTC))
	s.cron.Schedule(s.Schedule, cron.FuncJob(s.Fire))
	if s.FeedsInterval > 0 {
		s.cron.Schedule(slots(s.FeedsInterval), cron.FuncJob(s.FireFeeds))
	}
	s.cron.Start()
	next := s.Schedule.Next(time.Now().UTC())
	s.log().Info("scheduler: digest planned on cron", "next", next, "period", tasks.Period(next))
	if s.FeedsInterval > 0 {
		s.log().Info("scheduler: feeds polled", "every", s.FeedsInterval, "next", slots(s.FeedsInterval).Next(time.Now()))
	}
}

// slots fires at the start of each slot of tasks.FeedsSlot, the same
// instants on every replica (cron.Every counts from each one's start).
type slots time.Duration

func (d slots) Next(t time.Time) time.Time {
	return tasks.FeedsSlot(t, time.Duration(d)).Add(time.Duration(d))
}

// FireFeeds enqueues the feeds poll of the current slot now.
func (s *Scheduler) FireFeeds() {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slot, dup, err := tasks.EnqueueFeedsPoll(ctx, s.Queue, now(), s.FeedsInterval)
	switch {
	case err != nil:
		s.log().Error("scheduler: enqueue feeds poll; the next slot tries again", "slot", slot, "err", err)
	case dup:
		s.log().Debug("scheduler: feeds poll already queued by another replica", "slot", slot)
	default:
		s.log().Debug("scheduler: feeds poll enqueued", "slot", slot)
	}
}

func (s *Scheduler) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// Fire enqueues the plan of the current period now.
func (s *Scheduler) Fire() {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	period := tasks.Period(now())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dup, err := tasks.EnqueueDigestPlan(ctx, s.Queue, period)
	switch {
	case err != nil:
		s.log().Error("scheduler: enqueue digest plan", "period", period, "err", err)
	case dup:
		s.log().Info("scheduler: digest plan already queued by another replica", "period", period)
	default:
		s.log().Info("scheduler: digest plan enqueued", "period", period)
	}
}

// Stop stops firing and waits for a firing in progress.
func (s *Scheduler) Stop() {
	if s.cron != nil {
		<-s.cron.Stop().Done()
	}
}
