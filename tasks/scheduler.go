package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"
)

// Scheduler enqueues the digest plan on NEWSLETTER_DIGEST_CRON (UTC).
//
// It is not asynq's Scheduler: that one enqueues a task fixed when it was
// registered, and the plan's TaskID must name the period it fires in
// ("digest:2026-W49"). Like asynq's it has no leader election: every
// replica fires, they all meet on that TaskID, and a replica that fires
// after the plan finished finds the period's run record and plans nothing.
type Scheduler struct {
	Spec  string
	Queue Enqueuer
	Log   *slog.Logger
	// Now is the clock (the period is the ISO week of the firing time).
	Now func() time.Time

	cron *cron.Cron
}

// Start parses Spec and begins firing.
func (s *Scheduler) Start() error {
	s.cron = cron.New(cron.WithLocation(time.UTC))
	if _, err := s.cron.AddFunc(s.Spec, s.Fire); err != nil {
		return fmt.Errorf("digest cron %q: %w", s.Spec, err)
	}
	s.cron.Start()
	next := s.cron.Entries()[0].Next
	s.Log.Info("scheduler: digest planned on cron", "spec", s.Spec, "next", next, "period", Period(next))
	return nil
}

// Fire enqueues the plan of the current period now.
func (s *Scheduler) Fire() {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	period := Period(now())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dup, err := EnqueueDigestPlan(ctx, s.Queue, period)
	switch {
	case err != nil:
		s.Log.Error("scheduler: enqueue digest plan", "period", period, "err", err)
	case dup:
		s.Log.Info("scheduler: digest plan already queued by another replica", "period", period)
	default:
		s.Log.Info("scheduler: digest plan enqueued", "period", period)
	}
}

// Stop stops firing and waits for a firing in progress.
func (s *Scheduler) Stop() {
	if s.cron != nil {
		<-s.cron.Stop().Done()
	}
}
