package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// An edited sequence reaches the people in the middle of it at the next
// worker start: a step added before the one someone waits for is
// scheduled at its time (the later task deleted), one whose time they
// passed is not, and someone who finished gets a step added after the
// end. On the real Redis store and asynq queue.
func TestReconcileSequence(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Second)
	render, err := mailer.NewRenderer("", "welcome", "getting-started", "best-of")
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	rec := &recorder{}
	links := newHandlersLinks()
	links.Topics = sequenceSet(t, "  - {template: welcome, after: 1h}\n  - {template: best-of, after: 168h}\n")
	h := NewHandlers(Deps{Store: d.store, Mailer: rec, Render: render, Log: discard, Links: links, Queue: d.client,
		Now: func() time.Time { return now }})
	seq := h.Sequence
	// The old sequence's version is on record, as a worker of it left it.
	if _, err := seq.ReconcileSequence(ctx, d.store, d.insp); err != nil {
		t.Fatal(err)
	}

	// ann confirmed now; bob 5 days ago; cat 170 hours ago and had both
	// steps; dan 10 days ago (beyond every step); eve turned the
	// sequence's topic off.
	people := map[string]time.Duration{"ann": 0, "bob": 5 * 24 * time.Hour, "cat": 170 * time.Hour, "dan": 240 * time.Hour, "eve": 0}
	for name, ago := range people {
		at := t0.Add(-ago)
		email := name + "@x.io"
		st := d.store.WithClock(func() time.Time { return at })
		if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: email, Activate: true, Outbox: tasks.NewWelcomeAt(email, at.Add(time.Hour)).Outbox()}); err != nil {
			t.Fatal(err)
		}
		now = at.Add(time.Hour)
		if err := runTask(ctx, tasks.WelcomeEmail, seq.HandleWelcome, tasks.NewWelcomeAt(email, now).Task); err != nil {
			t.Fatal(err)
		}
		if name == "cat" {
			now = at.Add(168 * time.Hour)
			if err := runTask(ctx, tasks.SequenceStep, seq.HandleStep, tasks.NewStep(email, "best-of", now).Task); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := d.store.LeaveTopic(ctx, "eve@x.io", "digest", outbox.Cancel{}); err != nil {
		t.Fatal(err)
	}
	step := func(email, template string) (time.Time, bool) {
		t.Helper()
		info, err := d.insp.GetTaskInfo(tasks.QueueDefault, tasks.StepTaskID(email, template))
		if errors.Is(err, asynq.ErrTaskNotFound) {
			return time.Time{}, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return info.NextProcessAt, true
	}
	if _, ok := step("ann@x.io", "best-of"); !ok {
		t.Fatal("set-up: ann's best-of is not waiting")
	}

	// The operator adds getting-started (72h) and a last step (200h);
	// a worker starts a day later.
	links.Topics = sequenceSet(t, threeSteps+"  - {template: last, after: 200h}\n")
	seq.Links = links
	now = t0.Add(24 * time.Hour)
	n, err := seq.ReconcileSequence(ctx, d.store, d.insp)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("realigned %d people, want ann, bob and cat", n)
	}
	for _, c := range []struct {
		email, template string
		at              time.Duration // since t0; <0: not waiting
	}{
		{"ann@x.io", "getting-started", 72 * time.Hour},     // added before her best-of: on time
		{"ann@x.io", "best-of", -1},                         // deleted: getting-started schedules it
		{"bob@x.io", "getting-started", -1},                 // his day 3 is behind him
		{"bob@x.io", "best-of", 2 * 24 * time.Hour},         // as before
		{"cat@x.io", "last", 200*time.Hour - 170*time.Hour}, // finished, and gets the new last step
		{"dan@x.io", "last", -1},                            // beyond every step
		{"eve@x.io", "getting-started", -1},                 // left the topic (her old task is the API's to delete, the handler's to skip)
	} {
		at, ok := step(c.email, c.template)
		switch {
		case c.at < 0 && ok:
			t.Errorf("%s %s waits for %s, want nothing", c.email, c.template, at)
		case c.at >= 0 && !ok:
			t.Errorf("%s %s: nothing waits", c.email, c.template)
		case c.at >= 0 && !at.Equal(t0.Add(c.at)):
			t.Errorf("%s %s at %s, want %s", c.email, c.template, at.Sub(t0), c.at)
		}
	}
	// Once per edit: a second start finds the version on record.
	if n, err := seq.ReconcileSequence(ctx, d.store, d.insp); n != 0 || err != nil {
		t.Fatalf("second start: %d %v", n, err)
	}
}
