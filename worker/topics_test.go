package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// The digest goes to the active subscribers of its topic: at 10,000
// subscribers with every mix of topics and states, each reader of the
// digest gets it once and nobody else gets anything.
func TestDigestAudienceByTopic(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	const n = 10000
	reqs := make([]store.SubscribeRequest, n)
	var readers []string
	for i := range reqs {
		email := fmt.Sprintf("m%05d@example.org", i)
		req := store.SubscribeRequest{Email: email, Activate: true, OnlyNew: true}
		switch i % 6 {
		case 0:
			req.Topics = []string{"digest"}
			readers = append(readers, email)
		case 1:
			req.Topics = []string{"updates"}
		case 2:
			req.Topics = []string{"digest", "updates"}
			readers = append(readers, email)
		case 3, 5:
			req.Topics = []string{"digest", "updates"} // leaves below
		case 4:
			req.Topics, req.Activate = []string{"digest"}, false // pending
		}
		reqs[i] = req
	}
	errs, err := d.store.SubscribeMany(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", reqs[i].Email, err)
		}
	}
	for i := 3; i < n; i += 6 {
		if _, err := d.store.LeaveTopic(ctx, reqs[i].Email, "digest", outbox.Cancel{}); err != nil {
			t.Fatal(err)
		}
		if i+2 < n {
			if _, err := d.store.Unsubscribe(ctx, reqs[i+2].Email); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := d.store.AddItem(ctx, store.Item{Title: "Topics", URL: "https://example.com/topics"}); err != nil {
		t.Fatal(err)
	}
	d.startWorker(t, 1000000, 8)
	if dup, err := tasks.EnqueueDigestPlan(ctx, d.client, "2026-W50"); dup || err != nil {
		t.Fatal(dup, err)
	}
	d.waitRun(t, "2026-W50", int64(len(readers)))
	msgs := d.smtp.WaitFor(t, len(readers), poll.BusyMachine)
	d.exactlyOnce(t, readers)
	run, err := d.store.DigestRun(ctx, "2026-W50")
	if err != nil || run.Audience != int64(len(readers)) || run.Planned != int64(len(readers)) || run.Sent != int64(len(readers)) {
		t.Fatalf("run %+v %v, want audience, planned and sent %d", run, err, len(readers))
	}
	// Nothing more arrives: every batch is done.
	poll.True(t, poll.BusyMachine, "queue drained", func() bool {
		info, err := d.insp.GetQueueInfo(tasks.QueueCritical)
		return err == nil && info.Size == 0
	})
	if got := len(d.smtp.Messages()); got != len(readers) {
		t.Fatalf("%d mails for %d readers", got, len(readers))
	}
	if id := msgs[0].Header.Get("List-Id"); id != "Weekly digest <digest.newsletter.example.com>" {
		t.Fatalf("List-Id %q", id)
	}
}

// Events go only to people with updates on; turning updates off stops
// the next bundle, and a digest-only reader never gets one.
func TestEventsOnlyToUpdates(t *testing.T) {
	h, st, rec := newHandlers(t)
	ctx := context.Background()
	for email, topics := range map[string][]string{"u@x.io": {"updates"}, "d@x.io": {"digest"}} {
		if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: email, Activate: true, Topics: topics}); err != nil {
			t.Fatal(err)
		}
	}
	bundle := func(email string) error {
		return runTask(ctx, tasks.EventsEmail, h.Events.HandleEventsEmail, tasks.NewEventsEmail(tasks.EventsPayload{Email: email, Events: []tasks.EventPayload{
			{ID: fmt.Sprint(time.Now().UnixNano()), Email: email, Title: "t", URL: "https://x.io"}}}))
	}
	if err := bundle("u@x.io"); err != nil || rec.count() != 1 {
		t.Fatalf("updates reader: %v, %d mails", err, rec.count())
	}
	if m := rec.sent[0]; m.ListID != "Product updates <updates.newsletter.example.com>" {
		t.Fatalf("events List-Id %q", m.ListID)
	}
	if err := bundle("d@x.io"); err != nil || rec.count() != 1 {
		t.Fatalf("digest-only reader got events: %v, %d mails", err, rec.count())
	}
}
