package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
)

// OlderDigestRuns lists the periods of digest runs that a version older
// than this one began (their record has no as_issue field: they were to
// go out as email:digest batches, a path this version no longer runs) and
// that are not finished: still planning, or planned with fewer recipients
// counted sent, skipped or failed than planned (their batches may still be
// queued). Start-up refuses such data rather than leave the run's rest
// unsent.
//
// Only the latest run is read (keyLatestRun): there is no index of runs
// but that one, and a SCAN for the run hashes would walk the whole
// keyspace (every subscriber bucket, mark and token) on each start of
// every role and tool. An older version plans one period at a time, a
// week apart, and its batches live hours (quiet hours, retries), so a
// run before the latest one is long done. A run last heard of (planned,
// or begun while planning) longer ago than its marks are kept
// (sharedSentTTL) counts as finished: its tasks are long gone, and its
// counters may have expired with the marks, which would keep it
// "unfinished" for ever.
func (r *Redis) OlderDigestRuns(ctx context.Context) ([]string, error) {
	period, err := r.LatestDigestPeriod(ctx)
	if err != nil || period == "" {
		return nil, err
	}
	run, err := r.DigestRun(ctx, period)
	if errors.Is(err, ErrNoRun) {
		return nil, nil // the latest run's record is gone: nothing to finish
	}
	if err != nil {
		return nil, fmt.Errorf("older digest runs: %w", err)
	}
	// The last the run was heard of: the end of its planning, or its
	// start while it plans.
	last := cmp.Or(run.PlannedAt, run.CreatedAt)
	if run.AsIssue || !olderRunUnderWay(run, r.now().Sub(last) > sharedSentTTL) {
		return nil, nil
	}
	return []string{period}, nil
}

// olderRunUnderWay tells whether a run of the older path may still have
// mail to send; expired says it was last heard of longer ago than its
// counters are kept.
func olderRunUnderWay(run DigestRun, expired bool) bool {
	if expired {
		return false
	}
	switch run.State {
	case RunPlanning:
		return true
	case RunPlanned:
		return run.Planned > run.Sent+run.Skipped+run.Failed
	default: // empty: nothing was planned
		return false
	}
}
