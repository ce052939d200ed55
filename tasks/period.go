package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// Period is the default digest period of t: its ISO week, "2026-W49".
func Period(t time.Time) string {
	y, w := t.UTC().ISOWeek()
	return fmt.Sprintf("%d-W%02d", y, w)
}

// ValidPeriod reports whether p can name a period (and a TaskID part):
// 1 to 64 letters, digits, '-', '_' or '.'.
func ValidPeriod(p string) bool {
	if p == "" || len(p) > 64 {
		return false
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// ErrInvalidPeriod is returned for a period ValidPeriod refuses.
var ErrInvalidPeriod = errors.New("period: want 1-64 letters, digits, '-', '_' or '.'")

// The status of a digest run request, as the API answers it and the
// command prints it: one wording for both.
const (
	DigestQueued        = "queued"
	DigestAlreadyQueued = "already queued" // its plan is queued or running
)

// DigestRunStatus is the status of a request whose enqueue was a
// duplicate or not (EnqueueDigestPlan).
func DigestRunStatus(duplicate bool) string {
	if duplicate {
		return DigestAlreadyQueued
	}
	return DigestQueued
}

// EnqueueDigestPlan starts period's digest: the cron run, `newsletter
// digest run` and the admin API all call it, so a period is planned once
// whoever starts it. A TaskID conflict (the plan is already queued or
// running) is not an error: duplicate is true.
func EnqueueDigestPlan(ctx context.Context, q Enqueuer, period string) (duplicate bool, err error) {
	if !ValidPeriod(period) {
		return false, fmt.Errorf("%q: %w", period, ErrInvalidPeriod)
	}
	_, err = q.EnqueueContext(ctx, NewDigestPlan(period))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("enqueue digest plan %s: %w", period, err)
	}
	return false, nil
}
