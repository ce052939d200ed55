package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// SequenceSender handles the onboarding sequence: email:welcome (its first
// step) and email:step (each later one).
//
// A person's progress is their steps' delivery marks, one per step
// template; the steps' times are their delays from the confirmation.
// When a step's task runs it re-reads the subscriber and the marks, and
// under the topics file of today (nextStep) sends the step after the last
// one sent (the first step however late; a later one unless the person
// passed it while waiting, when the one after it is due too); then it
// schedules the following step under that step's own
// TaskID, so at most one step per person waits in Redis and leaving can
// delete it by name. A task whose step is not due (removed, moved later)
// only schedules the one that is. A step added while people wait for a
// later one reaches them on time through ReconcileSequence at start-up.
type SequenceSender struct {
	Deliver *Deliverer
	Links   Links
	Queue   tasks.Enqueuer
	Quiet   *quiet.Hours
	Metrics *Metrics
	Now     func() time.Time
	// Digests, when set, gives a step whose template lists items
	// (best-of) the latest digest's.
	Digests RecentDigests
}

// RecentDigests is the store's side of a step that lists the latest
// digest's items.
type RecentDigests interface {
	LatestDigestPeriod(ctx context.Context) (string, error)
	DigestItems(ctx context.Context, period string) ([]store.Item, error)
}

// The outcome label of newsletter_sequence_steps_total.
const (
	StepSent       = "sent"       // the step went out (or had, before a retry)
	StepLeft       = "left"       // the person left, or turned the sequence's topic off
	StepSuperseded = "superseded" // the task's step is no longer next: the next one was scheduled instead
)

// StepOutcomes lists the outcome label's values.
var StepOutcomes = []string{StepSent, StepLeft, StepSuperseded}

// HandleWelcome runs the first step.
func (h *SequenceSender) HandleWelcome(ctx context.Context, p tasks.WelcomePayload) error {
	return h.run(ctx, p.Email, 0, "")
}

// HandleStep runs a later step.
func (h *SequenceSender) HandleStep(ctx context.Context, p tasks.StepPayload) error {
	return h.run(ctx, p.Email, -1, p.Step)
}

// run is the task of step index (the first step: 0) or, for a later one,
// of step template.
func (h *SequenceSender) run(ctx context.Context, email string, index int, template string) error {
	seq := h.Links.Topics.Current().Sequence
	label := template
	if index == 0 && len(seq.Steps) > 0 {
		label = seq.Steps[0].Template
	}
	sub, ok, err := h.Deliver.Recipient(ctx, email, store.Active)
	if !ok {
		if err == nil {
			h.count(label, StepLeft)
		}
		return err
	}
	if !slices.Contains(sub.Topics, seq.Topic) {
		h.Deliver.Log.Info("skip: sequence topic is off", "subscriber", sub.ID, "topic", seq.Topic)
		h.count(label, StepLeft)
		return nil
	}
	marks := make([]store.Mark, len(seq.Steps))
	for i, st := range seq.Steps {
		marks[i] = stepMark(st.Template, sub.ID)
	}
	sent, err := h.Deliver.Store.SentMarks(ctx, marks)
	if err != nil {
		return fmt.Errorf("read sequence progress: %w", err)
	}
	now := h.Now()
	next, due := nextStep(seq, sub.ConfirmedAt, sent, now)
	if next < 0 {
		return nil // every step is behind the person
	}
	st := seq.Steps[next]
	if !due {
		if st.Template == label {
			// This task came early (its step moved later in the file).
			return &Deferred{Reason: "step " + st.Template + " is not due yet", In: sub.ConfirmedAt.Add(st.After).Sub(now)}
		}
		// This task's step was sent (a retry after the send), removed,
		// or moved: make sure the right one waits.
		h.count(label, StepSuperseded)
		return h.schedule(ctx, seq, sub, next)
	}
	if until := h.Quiet.Until(sub.Timezone, now); !until.IsZero() {
		return &Deferred{Reason: "quiet hours", In: until.Sub(now)}
	}
	data := h.Links.For(sub, seq.Topic)
	if h.Digests != nil && h.Deliver.Render.UsesEntries(st.Template) {
		if data.Entries, err = h.latestEntries(ctx); err != nil {
			return err
		}
	}
	if err := h.Deliver.DeliverOne(ctx, Mail{To: sub, Mark: marks[next], Data: data}); err != nil {
		return err
	}
	h.count(st.Template, StepSent)
	if index != 0 && next+1 < len(seq.Steps) && seq.Steps[next+1].Template == label {
		// This task's own step follows the one it just sent (a first
		// step that was still unsent when this task ran). Scheduling it
		// would clash with this task's TaskID and be dropped: the task
		// comes back at its step's time instead.
		in := max(sub.ConfirmedAt.Add(seq.Steps[next+1].After).Sub(now), time.Second)
		return &Deferred{Reason: "step " + label + " follows " + st.Template, In: in}
	}
	if st.Template != label {
		h.count(label, StepSuperseded)
	}
	return h.schedule(ctx, seq, sub, next+1)
}

// latestEntries are the items of the latest digest run (none before the
// first run).
func (h *SequenceSender) latestEntries(ctx context.Context) ([]mailer.Entry, error) {
	period, err := h.Digests.LatestDigestPeriod(ctx)
	if err != nil || period == "" {
		return nil, err
	}
	// The items alone: this is on every sequence mail's path, and the
	// run's counters are sums over every shard of the store.
	items, err := h.Digests.DigestItems(ctx, period)
	if errors.Is(err, store.ErrNoRun) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("latest digest %s: %w", period, err)
	}
	return entriesOf(items), nil
}

// nextStep is the step a person is at: the first step after the last one
// they were sent, unless it was passed (due false: it is still to come).
// -1: no step is left. Scheduled times are whole seconds, so a step due
// within the next second counts as due.
//
// A step was passed when it is more than passedAfter past its time and
// the step after it is due too: the person went by it while waiting (a
// step added to the file after its time, a long outage), and it is
// skipped rather than sent in a burst with the next. A step that is only
// late (asynq's poll, a busy worker, a short outage) still goes, in
// order: lateness of seconds or minutes must not cost a person a step.
//
// The first step is never passed: it is the welcome, what the person
// expects right after confirming, and every later step reads as a
// follow-up to it. Until it is sent it is the step, however late it runs.
func nextStep(seq topics.Sequence, confirmed time.Time, sent []bool, now time.Time) (index int, due bool) {
	first := 0
	for i, s := range sent {
		if s {
			first = i + 1
		}
	}
	if first >= len(seq.Steps) {
		return -1, false
	}
	at := func(i int) time.Time { return confirmed.Add(seq.Steps[i].After) }
	isDue := func(i int) bool { return !at(i).After(now.Add(time.Second)) }
	if !isDue(first) {
		return first, false
	}
	i := first
	for i > 0 && i+1 < len(seq.Steps) && isDue(i+1) && now.Sub(at(i)) > passedAfter {
		i++
	}
	return i, true
}

// passedAfter is how long past its time a step must be, with the next one
// due, to count as passed (nextStep): far more than a task is ever late
// for a busy worker or a restart, far less than the gaps of a real
// sequence (hours, days).
const passedAfter = time.Hour

// stepMark is the delivery mark of step template to a subscriber: shared
// by everyone's step (a bitmap), kept for good. The first step of the
// built-in sequence, "welcome", has the welcome's mark of earlier
// versions, so nobody gets it twice across an upgrade.
func stepMark(template string, id int64) store.Mark {
	return store.Mark{Kind: template, SubscriberID: id, Shared: true}
}

// schedule queues step i of seq for sub at its time (now, when that is
// past); past the last step, nothing. seq is the one i was found in: the
// sequence in effect may have changed since (the console).
func (h *SequenceSender) schedule(ctx context.Context, seq topics.Sequence, sub store.Subscriber, i int) error {
	if i >= len(seq.Steps) {
		return nil
	}
	st := seq.Steps[i]
	due := sub.ConfirmedAt.Add(st.After)
	if now := h.Now(); due.Before(now) {
		due = now
	}
	job := tasks.NewWelcomeAt(sub.Email, due)
	if i > 0 {
		job = tasks.NewStep(sub.Email, st.Template, due)
	}
	// The step's TaskID makes scheduling it again after a lost answer a
	// conflict, which is success (enqueueOnce).
	if err := enqueueOnce(ctx, h.Queue, job.Task, job.Options()...); err != nil {
		return fmt.Errorf("schedule step %s: %w", st.Template, err)
	}
	return nil
}

func (h *SequenceSender) count(step, outcome string) {
	if step != "" {
		h.Metrics.Steps.WithLabelValues(step, outcome).Inc()
	}
}
