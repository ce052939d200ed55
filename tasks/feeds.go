package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// DefaultFeedsInterval is NEWSLETTER_FEEDS_INTERVAL's default: how often
// the topics file's feeds are polled.
const DefaultFeedsInterval = 15 * time.Minute

// FeedsSlot is the poll slot now falls in: slots are interval wide and
// aligned on the Unix epoch, so every scheduler replica names the same
// one.
func FeedsSlot(now time.Time, interval time.Duration) time.Time {
	return now.UTC().Truncate(interval)
}

// FeedsPollTaskID is the id of a slot's poll: every replica meets on it.
func FeedsPollTaskID(slot time.Time) string {
	return fmt.Sprintf("feeds:poll:%d", slot.Unix())
}

// NewFeedsPoll is the poll of slot. The finished task is kept for the
// rest of the slot (Retention), so its TaskID stays taken and a replica
// that fires late does not poll again; the poll gives up (Timeout) before
// the next slot's starts.
func NewFeedsPoll(slot time.Time, interval time.Duration) *asynq.Task {
	return FeedsPoll.New(FeedsPollPayload{Slot: slot.UTC()},
		asynq.Timeout(max(interval, time.Minute)), asynq.Retention(interval))
}

// EnqueueFeedsPoll enqueues the poll of the slot now falls in. A TaskID
// conflict (another replica queued it) is not an error: duplicate is true.
func EnqueueFeedsPoll(ctx context.Context, q Enqueuer, now time.Time, interval time.Duration) (slot time.Time, duplicate bool, err error) {
	slot = FeedsSlot(now, interval)
	_, err = q.EnqueueContext(ctx, NewFeedsPoll(slot, interval))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return slot, true, nil
	}
	if err != nil {
		return slot, false, fmt.Errorf("enqueue feeds poll %s: %w", slot.Format(time.RFC3339), err)
	}
	return slot, false, nil
}
