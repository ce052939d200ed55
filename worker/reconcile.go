package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// ReconcileStore is what ReconcileSequence needs of the store (the Redis
// store's onboarding index and sequence version).
type ReconcileStore interface {
	Onboarding(ctx context.Context, since time.Time, offset, limit int) ([]int64, error)
	TrimOnboarding(ctx context.Context, before time.Time) error
	SequenceVersion(ctx context.Context) (string, error)
	SetSequenceVersion(ctx context.Context, v string) error
	SubscribersByID(ctx context.Context, ids []int64) ([]store.Subscriber, error)
	SentMarks(ctx context.Context, marks []store.Mark) ([]bool, error)
}

// TaskDeleter removes a waiting task (*asynq.Inspector).
type TaskDeleter interface {
	DeleteTask(queue, id string) error
}

// reconcilePage is how many people one round of the reconcile reads.
const reconcilePage = 200

// ReconcileSequence runs at a worker's start. When the sequence differs
// from the one the waiting steps were scheduled by (the operator edited
// the topics file), it walks everyone who confirmed within the sequence's
// length and makes their next step the one the file says now: a step
// added before the one they wait for is scheduled at its time (and the
// later one's task deleted: the new step schedules it after it is sent);
// a person who finished the old sequence gets its new later steps. A step
// whose time passed before it existed was passed, and is not sent. Several
// workers starting at once do the same work; the TaskIDs make it one.
func (h *SequenceSender) ReconcileSequence(ctx context.Context, st ReconcileStore, insp TaskDeleter) (scheduled int, err error) {
	seq := h.Links.Topics.Current().Sequence
	version := sequenceVersion(seq)
	old, err := st.SequenceVersion(ctx)
	if err != nil || old == version {
		return 0, err
	}
	now := h.Now()
	// Who confirmed before the longest delay has every step behind them.
	since := now.Add(-seq.Steps[len(seq.Steps)-1].After - time.Minute)
	if err := st.TrimOnboarding(ctx, since); err != nil {
		return 0, err
	}
	for offset := 0; ; offset += reconcilePage {
		ids, err := st.Onboarding(ctx, since, offset, reconcilePage)
		if err != nil {
			return scheduled, err
		}
		subs, err := st.SubscribersByID(ctx, ids)
		if err != nil {
			return scheduled, err
		}
		for _, sub := range subs {
			ok, err := h.realign(ctx, st, insp, seq, sub, now)
			if err != nil {
				return scheduled, err
			}
			if ok {
				scheduled++
			}
		}
		if len(ids) < reconcilePage {
			break
		}
	}
	// Recorded last: a reconcile cut short runs again at the next start.
	return scheduled, st.SetSequenceVersion(ctx, version)
}

// realign schedules sub's first step still to come, and deletes the
// waiting tasks of the steps after it. It reports whether it scheduled.
func (h *SequenceSender) realign(ctx context.Context, st ReconcileStore, insp TaskDeleter, seq topics.Sequence, sub store.Subscriber, now time.Time) (bool, error) {
	if sub.ID == 0 || sub.Status != store.Active || !slices.Contains(sub.Topics, seq.Topic) {
		return false, nil
	}
	marks := make([]store.Mark, len(seq.Steps))
	for i, s := range seq.Steps {
		marks[i] = stepMark(s.Template, sub.ID)
	}
	sent, err := st.SentMarks(ctx, marks)
	if err != nil {
		return false, fmt.Errorf("read sequence progress: %w", err)
	}
	first := 0
	for i, s := range sent {
		if s {
			first = i + 1
		}
	}
	// The first step after the last one sent whose time is still to
	// come; one already due is left to the task that waits for it.
	next := -1
	for i := first; i < len(seq.Steps); i++ {
		if sub.ConfirmedAt.Add(seq.Steps[i].After).After(now) {
			next = i
			break
		}
	}
	if next < 0 {
		return false, nil
	}
	refs := tasks.SequenceTasks(sub.Email, seq)
	for i := next + 1; i < len(seq.Steps); i++ {
		if err := insp.DeleteTask(refs[i].Queue, refs[i].ID); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
			h.Deliver.Log.Info("sequence: a later step's task not deleted; it schedules the right one when it runs", "err", err)
		}
	}
	return true, h.schedule(ctx, seq, sub, next)
}

// sequenceVersion fingerprints what decides the steps: the topic and
// each step's template and delay.
func sequenceVersion(seq topics.Sequence) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", seq.Topic)
	for _, s := range seq.Steps {
		fmt.Fprintf(h, "%s %d\n", s.Template, s.After)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}
