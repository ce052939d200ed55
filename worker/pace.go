package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// Pacer keeps sending within what receivers accept (*pace.Limiter).
type Pacer interface {
	// TakeN asks for up to n bulk sends: how many were granted, else how
	// long until one is free.
	TakeN(ctx context.Context, n int) (int, time.Duration, error)
	// DomainWait is how long a receiving domain asked us to pause.
	DomainWait(ctx context.Context, domain string) (time.Duration, error)
	// Throttle pauses a domain after it answered "slow down".
	Throttle(ctx context.Context, domain string, d time.Duration) error
}

// Deferred postpones a task without counting it as a failure: asynq retries
// it after In (RetryPolicy.Delay honours RetryAfter) and IsFailure is false.
type Deferred struct {
	Reason string
	In     time.Duration
}

func (d *Deferred) Error() string { return fmt.Sprintf("deferred for %s: %s", d.In, d.Reason) }

// RetryAfter implements the interface RetryPolicy.Delay looks for.
func (d *Deferred) RetryAfter() time.Duration { return d.In }

// maxInlineWait is the longest a handler sleeps for a send slot before it
// hands the task back to the queue; short waits are cheaper in place.
const maxInlineWait = time.Second

// pacer paces one task's sends: it asks about each receiving domain once,
// takes send slots in bulk, waits in place for short waits and hands the
// task back to the queue (Deferred) for long ones.
//
// asynq archives a task whose retries are used up even for an error that is
// no failure, so on its last attempt a task waits in place, whatever the
// wait (the task's own timeout bounds it).
type pacer struct {
	limits  Pacer // nil: no pacing
	domains map[string]time.Duration
	budget  int
	last    bool
}

// newPacer paces with limits. Asked under a task's context, each question
// waits out a Redis outage (waitingOutRedis), so a batch in flight carries
// on once Redis is back instead of handing itself back to a queue that
// cannot record it; asking again takes no slot twice, as only what did
// not reach Redis is asked again.
func newPacer(ctx context.Context, limits Pacer) *pacer {
	retried, ok1 := asynq.GetRetryCount(ctx)
	maxRetry, ok2 := asynq.GetMaxRetry(ctx)
	return &pacer{limits: limits, domains: map[string]time.Duration{}, last: ok1 && ok2 && retried >= maxRetry}
}

// domainPause is how long domain asked us to pause, looked up once a task.
func (p *pacer) domainPause(ctx context.Context, domain string) (time.Duration, error) {
	if p.limits == nil {
		return 0, nil
	}
	pause, ok := p.domains[domain]
	if !ok {
		var err error
		if pause, err = p.limits.DomainWait(ctx, domain); err != nil {
			return 0, fmt.Errorf("pace: %w", err)
		}
		p.domains[domain] = pause
	}
	return pause, nil
}

// wait lets one mail to domain go: after the domain's pause and, for bulk
// mail, a send slot (taking up to want at once). A confirmation is not held
// by the bulk rate: a person waits for it with the page open, and the
// subscribe limit already bounds it.
func (p *pacer) wait(ctx context.Context, domain string, bulk bool, want int) error {
	if p.limits == nil {
		return nil
	}
	pause, err := p.domainPause(ctx, domain)
	if err != nil {
		return err
	}
	if pause > 0 {
		if err := p.sleep(ctx, pause, "receiver "+domain+" asked us to slow down"); err != nil {
			return err
		}
		p.domains[domain] = 0
	}
	if !bulk {
		return nil
	}
	return p.take(ctx, want)
}

// take takes one send slot of the pacer's rate, asking for up to want at
// once.
func (p *pacer) take(ctx context.Context, want int) error {
	if p.limits == nil {
		return nil
	}
	for p.budget == 0 {
		n, wait, err := p.limits.TakeN(ctx, max(want, 1))
		if err != nil {
			return fmt.Errorf("pace: %w", err)
		}
		if p.budget = n; n > 0 {
			break
		}
		if err := p.sleep(ctx, wait, "send rate reached"); err != nil {
			return err
		}
	}
	p.budget--
	return nil
}

// sleep waits in place for a short wait, or for any wait on the last
// attempt; otherwise it hands the task back to the queue.
func (p *pacer) sleep(ctx context.Context, wait time.Duration, reason string) error {
	if wait > maxInlineWait && !p.last {
		return &Deferred{Reason: reason, In: wait}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return &Deferred{Reason: reason, In: wait}
	case <-t.C:
		return nil
	}
}

// paceLane is the middleware of a lane with a shared rate (Lane.Pace):
// every task takes one slot of limits before it runs. A short wait is
// waited in place; a long one hands the task back to its queue as
// Deferred, which is no failure (on its last attempt it waits in place,
// as the e-mail pacer does).
func paceLane(limits RateLimiter) asynq.MiddlewareFunc {
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			if err := newPacer(ctx, rateOnly{limits}).take(ctx, 1); err != nil {
				return err
			}
			return next.ProcessTask(ctx, t)
		})
	}
}

// rateOnly is a Pacer with a shared rate and no receiving domains.
type rateOnly struct{ RateLimiter }

func (rateOnly) DomainWait(context.Context, string) (time.Duration, error) { return 0, nil }
func (rateOnly) Throttle(context.Context, string, time.Duration) error     { return nil }
