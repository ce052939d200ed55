package worker

import (
	"context"
	"errors"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/tasks"
)

// FeedbackQueue is the bounce intake's feedback.Consumer: it queues a
// feedback task (TypeFeedback, applied by FeedbackHandler) for each event.
// The channel reads and verifies reports but queues nothing itself, so
// this is where its events become the worker's tasks.
type FeedbackQueue struct {
	Queue tasks.Enqueuer
}

// Consume queues ev. A report already queued (the same id, its task not
// yet gone) is taken, not an error: the sender need not try again.
func (q FeedbackQueue) Consume(ctx context.Context, ev feedback.Event) error {
	task, err := tasks.NewFeedback(tasks.FeedbackPayload(ev))
	if err != nil {
		return err
	}
	_, err = q.Queue.EnqueueContext(ctx, task)
	if errors.Is(err, asynq.ErrTaskIDConflict) || errors.Is(err, asynq.ErrDuplicateTask) {
		return nil
	}
	return err
}
