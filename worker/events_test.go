package worker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/tasks"
)

func (d *delivery) events(t *testing.T, email string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := d.client.Enqueue(olderEvent(email, fmt.Sprintf("Event %02d for %s", i, email), fmt.Sprintf("https://example.com/e/%d", i), time.Now())); err != nil {
			t.Fatal(err)
		}
	}
}

func maxSize(n int) func(*Config) {
	return func(c *Config) { c.GroupMaxSize = n }
}

func TestSixtyEventsOneMail(t *testing.T) {
	d := newDelivery(t)
	seed(t, d.store, "ev", 1)
	d.events(t, "ev0000@example.org", 60)
	d.startWorker(t, 100000, 4, maxSize(100))
	m := d.smtp.WaitFor(t, 1, poll.BusyMachine)[0]
	text := m.Text()
	for i := 0; i < 60; i++ {
		if !strings.Contains(text, fmt.Sprintf("Event %02d for", i)) {
			t.Fatalf("event %d missing from the bundle", i)
		}
	}
	if !strings.Contains(m.Header.Get("Subject"), "60 new notifications") {
		t.Fatalf("subject %q", m.Header.Get("Subject"))
	}
	poll.True(t, poll.BusyMachine, "events drained", func() bool {
		info, err := d.insp.GetQueueInfo(tasks.QueueDefault)
		return err == nil && info.Size == 0 && info.Aggregating == 0
	})
	if n := len(d.smtp.Messages()); n != 1 {
		t.Fatalf("60 events made %d mails, want 1", n)
	}
}

func TestMaxSizeSplitsBundles(t *testing.T) {
	d := newDelivery(t)
	seed(t, d.store, "ev", 1)
	d.events(t, "ev0000@example.org", 60)
	d.startWorker(t, 100000, 4, maxSize(50))
	msgs := d.smtp.WaitFor(t, 2, poll.BusyMachine)
	entries := 0
	for _, m := range msgs {
		entries += strings.Count(m.Text(), "Event ")
	}
	poll.True(t, poll.BusyMachine, "events drained", func() bool {
		info, err := d.insp.GetQueueInfo(tasks.QueueDefault)
		return err == nil && info.Size == 0 && info.Aggregating == 0
	})
	if n := len(d.smtp.Messages()); n != 2 || entries != 60 {
		t.Fatalf("%d mails with %d entries, want 2 mails with 60", n, entries)
	}
}

func TestEventsForThreePeopleThreeMails(t *testing.T) {
	d := newDelivery(t)
	people := seed(t, d.store, "p", 3)
	for _, p := range people {
		d.events(t, p, 5)
	}
	d.startWorker(t, 100000, 4, maxSize(50))
	d.smtp.WaitFor(t, 3, poll.BusyMachine)
	for _, p := range people {
		got := d.smtp.To(p)
		if len(got) != 1 || strings.Count(got[0].Text(), "Event ") != 5 || strings.Contains(got[0].Text(), "for "+people[(indexOf(people, p)+1)%3]) {
			t.Fatalf("%s: %d mails, or someone else's events", p, len(got))
		}
	}
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// TestAggregatedTaskTwiceSendsOnce: after a crash asynq can produce the same
// bundle twice; the bundle's mark makes the second a no-op.
func TestAggregatedTaskTwiceSendsOnce(t *testing.T) {
	h, st, rec := newHandlers(t)
	activate(t, st, "a@x.org")
	var events []*asynq.Task
	for i := 0; i < 3; i++ {
		events = append(events, olderEvent("a@x.org", fmt.Sprint("e", i), "https://x/e", time.Now()))
	}
	agg := Aggregator(discard)
	bundle := agg.Aggregate("a@x.org", events)
	// The same events in another order are the same bundle.
	again := agg.Aggregate("a@x.org", []*asynq.Task{events[2], events[0], events[1]})
	ctx := context.Background()
	for _, b := range []*asynq.Task{bundle, again} {
		if err := runTask(ctx, tasks.EventsEmail, h.Events.HandleEventsEmail, b); err != nil {
			t.Fatal(err)
		}
	}
	if rec.count() != 1 {
		t.Fatalf("a bundle delivered twice sent %d mails", rec.count())
	}
	// An inactive person gets none.
	if _, err := st.Unsubscribe(ctx, "a@x.org"); err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.EventsEmail, h.Events.HandleEventsEmail, agg.Aggregate("a@x.org", []*asynq.Task{olderEvent("a@x.org", "late", "https://x/l", time.Now())})); err != nil {
		t.Fatal(err)
	}
	if rec.count() != 1 {
		t.Fatal("events mailed to someone who left")
	}
}

// olderEvent is an event as an earlier version queued it: grouped by
// address, the address in the payload. Such tasks are still read while
// they drain (EventsPayload.Email).
func olderEvent(email, title, url string, now time.Time) *asynq.Task {
	return tasks.Event.New(tasks.EventPayload{ID: tasks.NewEventID(), Email: email, Title: title, URL: url, At: now.UTC()}, asynq.Group(email))
}
