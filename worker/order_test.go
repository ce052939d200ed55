package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// TestPersonsEventsInOrder: two events for one person, fanned out in the
// order they were posted, reach the person's browser in that order even
// when the later one's task runs first: it waits (not a failure) until
// the earlier one is delivered; another person's event does not wait.
func TestPersonsEventsInOrder(t *testing.T) {
	d := newDelivery(t)
	svc, client := newPushService(t)
	ctx := context.Background()
	emails := seed(t, d.store, "o", 2, func(r *store.SubscribeRequest) { r.Topics = []string{topics.Updates} })
	sub, mine := addBrowser(t, d.store, svc, emails[0])
	other, _ := addBrowser(t, d.store, svc, emails[1])
	push := NewHandlers(Deps{Store: d.store, Push: client, Metrics: d.metrics, Log: discard}).Push
	posted := time.Now()
	fan := func(id, title string, at time.Time, who int64) *asynq.Task {
		t.Helper()
		rec := &recordQueue{}
		f := d.fanout()
		f.Queue = rec
		p := tasks.FanoutPayload{ID: id, SubscriberID: who, Title: title, URL: "https://app.example/" + id, At: at, Channels: []string{"push"}}
		if err := runTask(ctx, tasks.Fanout, f.HandleFanout, tasks.NewFanout(p)); err != nil {
			t.Fatal(err)
		}
		for _, task := range rec.tasks {
			if task.Type() == tasks.TypePush {
				return task
			}
		}
		t.Fatalf("%s: no push queued", id)
		return nil
	}
	first := fan("ev_first", "Order placed", posted, sub.ID)
	second := fan("ev_second", "Order shipped", posted.Add(time.Second), sub.ID)
	elsewhere := fan("ev_other", "Welcome", posted.Add(2*time.Second), other.ID)

	err := runTask(ctx, tasks.Push, push.HandlePush, second)
	var d2 *Deferred
	if !errors.As(err, &d2) || IsFailure(err) || len(svc.Received()) != 0 {
		t.Fatalf("the later event first: %v, %d pushed; want it to wait", err, len(svc.Received()))
	}
	if err := runTask(ctx, tasks.Push, push.HandlePush, elsewhere); err != nil {
		t.Fatalf("another person's event waited: %v", err)
	}
	for _, task := range []*asynq.Task{first, second} {
		if err := runTask(ctx, tasks.Push, push.HandlePush, task); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, m := range svc.Received() {
		if m.Endpoint == mine.Endpoint {
			got = append(got, string(m.Plaintext))
		}
	}
	if len(got) != 2 || !strings.Contains(got[0], "Order placed") || !strings.Contains(got[1], "Order shipped") {
		t.Fatalf("the person's pushes, in order: %q", got)
	}
}

// TestEventsMailListsInPostingOrder: a person's bundled events mail lists
// the events in the order they were posted, whatever order the group
// handed them in.
func TestEventsMailListsInPostingOrder(t *testing.T) {
	h, st, rec := newHandlers(t)
	activate(t, st, "b@x.org")
	t0 := time.Now()
	placed := olderEvent("b@x.org", "Order placed", "https://x/1", t0)
	shipped := olderEvent("b@x.org", "Order shipped", "https://x/2", t0.Add(time.Minute))
	bundle := Aggregator(discard).Aggregate("b@x.org", []*asynq.Task{shipped, placed})
	if err := runTask(context.Background(), tasks.EventsEmail, h.Events.HandleEventsEmail, bundle); err != nil {
		t.Fatal(err)
	}
	if rec.count() != 1 {
		t.Fatalf("%d mails", rec.count())
	}
	text := rec.sent[0].Text
	if i, j := strings.Index(text, "Order placed"), strings.Index(text, "Order shipped"); i < 0 || j < 0 || i > j {
		t.Fatalf("the events out of order:\n%s", text)
	}
}
