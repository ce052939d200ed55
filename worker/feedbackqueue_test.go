package worker

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/tasks"
)

// answeringQueue records the tasks queued and answers err.
type answeringQueue struct {
	got []*asynq.Task
	err error
}

func (q *answeringQueue) EnqueueContext(_ context.Context, t *asynq.Task, _ ...asynq.Option) (*asynq.TaskInfo, error) {
	q.got = append(q.got, t)
	return &asynq.TaskInfo{}, q.err
}

// The intake's events become feedback tasks as they were read; a report
// queued before is taken, a queue that is away is an error (the intake's
// 451), and so is an event no task can be made of.
func TestFeedbackQueueConsumes(t *testing.T) {
	ctx := context.Background()
	ev := feedback.Event{ID: "smtp-1", SubscriberID: 42, Type: "hard", Source: "smtp", Kind: "digest", IssueID: 3, Reason: "5.1.1"}
	q := &answeringQueue{}
	if err := (FeedbackQueue{Queue: q}).Consume(ctx, ev); err != nil || len(q.got) != 1 {
		t.Fatalf("consume: %v, %d tasks", err, len(q.got))
	}
	var p tasks.FeedbackPayload
	if err := json.Unmarshal(q.got[0].Payload(), &p); err != nil || p != tasks.FeedbackPayload(ev) || q.got[0].Type() != tasks.TypeFeedback {
		t.Fatalf("task %s %s (%v), want the event as read", q.got[0].Type(), q.got[0].Payload(), err)
	}
	for _, dup := range []error{asynq.ErrTaskIDConflict, asynq.ErrDuplicateTask} {
		if err := (FeedbackQueue{Queue: &answeringQueue{err: dup}}).Consume(ctx, ev); err != nil {
			t.Fatalf("a report queued before: %v, want taken", err)
		}
	}
	away := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	if err := (FeedbackQueue{Queue: &answeringQueue{err: away}}).Consume(ctx, ev); !errors.Is(err, away) {
		t.Fatalf("queue away: %v", err)
	}
	if err := (FeedbackQueue{Queue: &answeringQueue{}}).Consume(ctx, feedback.Event{Type: "hard", Source: "smtp"}); err == nil {
		t.Fatal("an event naming nobody was queued")
	}
}
