package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// Pacer keeps sending within what receivers accept (*pace.Limiter).
type Pacer interface {
	// Take asks for one bulk send: zero means go, else how long to wait.
	Take(ctx context.Context) (time.Duration, error)
	// TakeN asks for up to n sends: how many were granted, else the wait.
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

// DefaultThrottle is how long a domain that answered "slow down" is paused.
const DefaultThrottle = time.Minute

// pace waits for the domain's pause and, for bulk mail, a send slot. A
// confirmation is not held by the bulk rate: a person waits for it with the
// page open, and the subscribe limit already bounds it.
//
// asynq archives a task whose retries are used up even for an error that is
// no failure, so on its last attempt a task waits here instead of deferring.
func (h *Handlers) pace(ctx context.Context, domain string, bulk bool) error {
	if h.Pace == nil {
		return nil
	}
	retried, ok1 := asynq.GetRetryCount(ctx)
	maxRetry, ok2 := asynq.GetMaxRetry(ctx)
	lastAttempt := ok1 && ok2 && retried >= maxRetry
	for {
		wait, err := h.Pace.DomainWait(ctx, domain)
		reason := "receiver " + domain + " asked us to slow down"
		if err == nil && wait == 0 && bulk {
			wait, err = h.Pace.Take(ctx)
			reason = "send rate reached"
		}
		if err != nil {
			return fmt.Errorf("pace: %w", err)
		}
		if wait == 0 {
			return nil
		}
		if wait > maxInlineWait && !lastAttempt {
			return &Deferred{Reason: reason, In: wait}
		}
		t := time.NewTimer(min(wait, maxInlineWait))
		select {
		case <-ctx.Done():
			t.Stop()
			return &Deferred{Reason: reason, In: wait}
		case <-t.C:
		}
	}
}
