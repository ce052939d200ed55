package tasks

import (
	"context"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/store"
)

// Enqueuer is what dispatching needs of *asynq.Client.
type Enqueuer interface {
	EnqueueContext(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error)
}

// Dispatch enqueues j and then clears its outbox entry. A TaskID conflict
// means the same job is already queued: duplicate is true and err nil. When
// the enqueue fails the outbox entry stays, and the relay enqueues it later.
func Dispatch(ctx context.Context, q Enqueuer, s store.Store, j Job) (duplicate bool, err error) {
	_, err = q.EnqueueContext(ctx, j.Task, j.Options()...)
	switch {
	case errors.Is(err, asynq.ErrTaskIDConflict):
		duplicate = true
	case err != nil:
		return false, fmt.Errorf("enqueue %s: %w", j.ID, err)
	}
	if err := s.OutboxDone(ctx, j.ID); err != nil {
		// The task is queued; the relay will find the entry, get a
		// conflict and clear it. Nothing is lost or doubled.
		return duplicate, nil
	}
	return duplicate, nil
}
