package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/channels/webpush/webpushtest"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// newPushService is a test push service and a client signing for it.
func newPushService(t *testing.T) (*webpushtest.Server, webpush.Sender) {
	t.Helper()
	pub, priv, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	v, err := webpush.NewVAPID(pub, priv, "mailto:ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	g := netguard.Guard{AllowPrivate: true}
	return webpushtest.New(t, pub), webpush.NewClient(v, g.Client(netguard.Limits{Timeout: 5 * time.Second}))
}

// addBrowser gives subscriber email a browser of svc.
func addBrowser(t *testing.T, st *store.Redis, svc *webpushtest.Server, email string) (store.Subscriber, webpush.Subscription) {
	t.Helper()
	sub, err := st.Get(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	b := svc.NewSubscription()
	if err := st.AddPushSubscription(context.Background(), sub.ID, store.PushSubscription{Endpoint: b.Endpoint, P256DH: b.P256DH, Auth: b.Auth}); err != nil {
		t.Fatal(err)
	}
	return sub, b
}

// TestFanoutTopicEventEachChannelOnce: an event for a topic reaches every
// active reader of it by e-mail, and those with a browser by push (the
// push service decrypts each); readers without the topic get nothing; a
// browser whose push service says 410 is deleted; and the same fan-out
// run again enqueues nothing.
func TestFanoutTopicEventEachChannelOnce(t *testing.T) {
	d := newDelivery(t)
	svc, client := newPushService(t)
	d.push = client
	ctx := context.Background()
	readers := seed(t, d.store, "r", 40)
	others := seed(t, d.store, "o", 5, func(r *store.SubscribeRequest) { r.Topics = []string{topics.Digest} })
	pushed := map[string]bool{}
	for _, e := range readers[:10] {
		_, b := addBrowser(t, d.store, svc, e)
		pushed[b.Endpoint] = true
	}
	for _, e := range others {
		addBrowser(t, d.store, svc, e)
	}
	gone, goneBrowser := addBrowser(t, d.store, svc, readers[10])
	svc.AnswerFor(goneBrowser.Endpoint, http.StatusGone, "")
	d.startWorker(t, 100000, 4)

	p := tasks.FanoutPayload{ID: tasks.NewEventID(), Topic: topics.Updates, Title: "We launched", URL: "https://example.com/launch", At: time.Now()}
	if _, err := d.client.EnqueueContext(ctx, tasks.NewFanout(p)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, poll.BusyMachine, func() error {
		if n := len(d.smtp.Messages()); n < len(readers) {
			return fmt.Errorf("%d of %d mails", n, len(readers))
		}
		if n := len(svc.Received()); n < len(pushed) {
			return fmt.Errorf("%d of %d pushes", n, len(pushed))
		}
		if left, _ := d.store.PushSubscriptions(ctx, gone.ID); len(left) != 0 {
			return fmt.Errorf("the gone browser is still stored")
		}
		return nil
	})
	d.exactlyOnce(t, readers)
	if n := len(d.smtp.Messages()); n != len(readers) {
		t.Fatalf("%d mails for %d readers of the topic", n, len(readers))
	}
	for _, m := range svc.Received() {
		n, err := m.Notification()
		if !pushed[m.Endpoint] || err != nil || n.Title != "We launched" || n.URL != "https://example.com/launch" {
			t.Fatalf("push to %s: %+v %v", m.Endpoint, n, err)
		}
		delete(pushed, m.Endpoint) // a second one to the same browser fails here
	}

	// The fan-out again (a retry after a crash): every reader is marked,
	// nothing is queued.
	rec := &recordQueue{}
	again := *d.fanout()
	again.Queue = rec
	if err := runTask(ctx, tasks.Fanout, again.HandleFanout, tasks.NewFanout(p)); err != nil {
		t.Fatal(err)
	}
	if len(rec.tasks) != 0 {
		t.Fatalf("the fan-out run again queued %d tasks", len(rec.tasks))
	}
}

// fanout is a FanoutSender on d's store, for calling the handler directly.
func (d *delivery) fanout() *FanoutSender {
	render, _ := mailer.NewRenderer("")
	return NewHandlers(Deps{Store: d.store, Render: render, Queue: d.client, Links: newHandlersLinks(), Log: discard}).Fanout
}

// TestPushStopsWithTheTopic: a person who turns the topic off (or leaves)
// after the fan-out gets no push; one still reading it gets one, once,
// however often the task runs.
func TestPushStopsWithTheTopic(t *testing.T) {
	d := newDelivery(t)
	svc, client := newPushService(t)
	ctx := context.Background()
	emails := seed(t, d.store, "p", 3)
	var subs []store.Subscriber
	for _, e := range emails {
		s, _ := addBrowser(t, d.store, svc, e)
		subs = append(subs, s)
	}
	if _, err := d.store.LeaveTopic(ctx, emails[1], topics.Updates, outbox.Cancel{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.store.Unsubscribe(ctx, emails[2]); err != nil {
		t.Fatal(err)
	}
	h := NewHandlers(Deps{Store: d.store, Push: client, Metrics: d.metrics, Log: discard}).Push
	for range 2 {
		for _, s := range subs {
			task := tasks.NewPush(tasks.PushPayload{Key: "ev:x", SubscriberID: s.ID, Topics: []string{topics.Updates}, Title: "Hello"})
			if err := runTask(ctx, tasks.Push, h.HandlePush, task); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := svc.Received()
	if len(got) != 1 {
		t.Fatalf("%d pushes, want 1 (the reader who kept the topic, once)", len(got))
	}
	if b, _ := d.store.PushSubscriptions(ctx, subs[0].ID); len(b) != 1 || got[0].Endpoint != b[0].Endpoint {
		t.Fatalf("push went to %s", got[0].Endpoint)
	}
}

// TestPushUnavailableRetriesAfterRetryAfter: a 503 with Retry-After fails
// the task (counted, for the backoff) and asks for at least that wait; the
// retry sends it once the service is back.
func TestPushUnavailableRetriesAfterRetryAfter(t *testing.T) {
	d := newDelivery(t)
	svc, client := newPushService(t)
	ctx := context.Background()
	s, _ := addBrowser(t, d.store, svc, seed(t, d.store, "u", 1)[0])
	h := NewHandlers(Deps{Store: d.store, Push: client, PushRetry: RetryPolicy{Base: time.Millisecond, Max: time.Second}, Metrics: d.metrics, Log: discard}).Push
	task := tasks.NewPush(tasks.PushPayload{Key: "ev:y", SubscriberID: s.ID, Topics: []string{topics.Updates}, Title: "Hi"})
	svc.Answer(http.StatusServiceUnavailable, "120")
	err := runTask(ctx, tasks.Push, h.HandlePush, task)
	if err == nil || !IsFailure(err) || redisAway(err) {
		t.Fatalf("503: %v, want a counted failure", err)
	}
	if wait := h.RetryDelay(0, err, task); wait < 2*time.Minute {
		t.Fatalf("retry in %s, want at least the Retry-After of 2m", wait)
	}
	svc.Answer(0, "")
	if err := runTask(ctx, tasks.Push, h.HandlePush, task); err != nil || len(svc.Received()) != 1 {
		t.Fatalf("retry: %v, %d received", err, len(svc.Received()))
	}
}

// TestIssueFanoutPushesReadersWithABrowserOnce: an issue's fan-out
// queues one push per reader of its topics who has a browser, none for
// the others (nor marks them), and run again (a retry after a crash)
// queues nothing.
func TestIssueFanoutPushesReadersWithABrowserOnce(t *testing.T) {
	d := newDelivery(t)
	svc, _ := newPushService(t)
	ctx := context.Background()
	readers := seed(t, d.store, "r", 30, func(r *store.SubscribeRequest) { r.Topics = []string{topics.Digest} })
	with := map[int64]bool{}
	for _, e := range readers[5:12] {
		sub, _ := addBrowser(t, d.store, svc, e)
		with[sub.ID] = true
	}
	is, err := d.store.CreateIssue(ctx, store.IssueContent{Subject: "S", Body: "b", Topics: []string{topics.Digest}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if is, err = d.store.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	p := tasks.FanoutPayload{IssueID: is.ID, Round: is.Round, Topics: is.Topics, Title: "S", URL: "https://example.com/archive/s", At: time.Now()}
	for run := range 2 {
		rec := &recordQueue{}
		f := d.fanout()
		f.Page, f.Queue = 8, rec // several pages
		if err := runTask(ctx, tasks.Fanout, f.HandleFanout, tasks.NewFanout(p)); err != nil {
			t.Fatal(err)
		}
		got := map[int64]int{}
		for _, task := range rec.tasks {
			var pp tasks.PushPayload
			if err := json.Unmarshal(task.Payload(), &pp); err != nil || task.Type() != tasks.TypePush {
				t.Fatalf("queued %s %s: %v", task.Type(), task.Payload(), err)
			}
			got[pp.SubscriberID]++
		}
		want := len(with)
		if run == 1 {
			want = 0
		}
		if len(rec.tasks) != want || len(got) != want {
			t.Fatalf("run %d queued %d pushes to %d readers, want %d", run, len(rec.tasks), len(got), want)
		}
		for id := range got {
			if !with[id] {
				t.Fatalf("run %d pushed reader %d, who has no browser", run, id)
			}
		}
	}
	marks := make([]store.Mark, 0, len(readers))
	for _, e := range readers {
		sub, err := d.store.Get(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		marks = append(marks, store.Mark{Kind: tasks.FanoutMarkKind, Key: p.Key(), SubscriberID: sub.ID, Shared: true})
	}
	done, err := d.store.SentMarks(ctx, marks)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range marks {
		if done[i] != with[m.SubscriberID] {
			t.Fatalf("reader %d marked %v, has a browser %v", m.SubscriberID, done[i], with[m.SubscriberID])
		}
	}
}

// A person's event names them by id all the way (no address in a task,
// so an erasure leaves none in the queue), and a task of the older shape,
// naming them by address, still reaches them while it drains.
func TestPersonEventByIDAndByAddress(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	reader := seed(t, d.store, "p", 1, func(r *store.SubscribeRequest) { r.Topics = []string{topics.Updates} })[0]
	sub, err := d.store.Get(ctx, reader)
	if err != nil {
		t.Fatal(err)
	}
	mails := &recorder{}
	for _, p := range []tasks.FanoutPayload{
		{ID: tasks.NewEventID(), SubscriberID: sub.ID, Title: "By id", URL: "https://example.com/id", At: time.Now()},
		{ID: tasks.NewEventID(), Email: reader, Title: "By address", URL: "https://example.com/addr", At: time.Now()},
	} {
		rec := &recordQueue{}
		h := *d.fanout()
		h.Queue = rec
		if err := runTask(ctx, tasks.Fanout, h.HandleFanout, tasks.NewFanout(p)); err != nil {
			t.Fatal(err)
		}
		if len(rec.tasks) != 1 || rec.tasks[0].Type() != tasks.TypeEvent {
			t.Fatalf("%s: queued %d tasks, want the person's event", p.Title, len(rec.tasks))
		}
		var ev tasks.EventPayload
		if err := json.Unmarshal(rec.tasks[0].Payload(), &ev); err != nil || ev.SubscriberID != sub.ID || ev.Email != "" ||
			strings.Contains(string(rec.tasks[0].Payload()), reader) {
			t.Fatalf("%s: event payload %s (%v): want the subscriber by id, no address", p.Title, rec.tasks[0].Payload(), err)
		}
		// The bundle by id is mailed to the person.
		bundle := Aggregator(discard).Aggregate(tasks.EventGroup(sub.ID), rec.tasks)
		if strings.Contains(string(bundle.Payload()), reader) {
			t.Fatalf("the bundle holds the address: %s", bundle.Payload())
		}
		events := NewHandlers(Deps{Store: d.store, Mailer: mails, Render: h.Deliver.Render, Links: h.Links, Log: discard}).Events
		if err := runTask(ctx, tasks.EventsEmail, events.HandleEventsEmail, bundle); err != nil {
			t.Fatal(err)
		}
	}
	if n := mails.count(); n != 2 {
		t.Fatalf("%d mails to the reader, want both events'", n)
	}
	for _, m := range mails.sent {
		if m.To != reader {
			t.Fatalf("an event's mail went to %q, want %q", m.To, reader)
		}
	}
}
