package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// OrderStore is what keeps a person's events in order on a channel
// (store.PersonOrder).
type OrderStore interface {
	Turn(ctx context.Context, channel, key string, id int64) (bool, error)
	Leave(ctx context.Context, channel, key string, id int64) error
}

// orderWait is how soon a person's event that waits for an earlier one
// looks again.
const orderWait = time.Second

// inOrder runs deliver for an event's task on channel when the event's
// turn has come for its person (every event posted before it for them
// on that channel is done), and notes it done once it is settled: sent,
// dropped or given up. Until its turn it waits, not counted as a failure;
// only that person's later events wait with it. A zero at (an issue's
// notification) is not in any order.
func inOrder(ctx context.Context, s OrderStore, channel, key string, id int64, at time.Time, deliver func() error) error {
	if at.IsZero() {
		return deliver()
	}
	turn, err := s.Turn(ctx, channel, key, id)
	if err != nil {
		return fmt.Errorf("%s: order: %w", channel, err)
	}
	if !turn {
		return &Deferred{Reason: "an event posted before it for the same person is not delivered yet", In: orderWait}
	}
	err = deliver()
	if settled(ctx, err) {
		if lerr := s.Leave(context.Background(), channel, key, id); lerr != nil {
			// The next event waits until this one is stale (StaleOrder)
			// or a retry of it leaves.
			return errors.Join(err, fmt.Errorf("%s: leave the order: %w", channel, lerr))
		}
	}
	return err
}

// settled tells whether a task that ended with err is done with for
// good: delivered or dropped, given up (SkipRetry), or failed on its
// last attempt (asynq archives it).
func settled(ctx context.Context, err error) bool {
	if err == nil || errors.Is(err, asynq.SkipRetry) {
		return true
	}
	retried, ok1 := asynq.GetRetryCount(ctx)
	most, ok2 := asynq.GetMaxRetry(ctx)
	return ok1 && ok2 && IsFailure(err) && retried >= most
}
