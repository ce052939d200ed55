package worker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/testutil"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/channels/webhook"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/testkit/nettest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// endpoint is an admin's webhook receiver: it records each request and
// answers with the status the test scripts (200 when it has none).
type endpoint struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []hit
	status func(n int) int
}

type hit struct {
	header http.Header
	body   []byte
}

func newEndpoint(t *testing.T, status func(n int) int) *endpoint {
	e := &endpoint{status: status}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.got = append(e.got, hit{r.Header.Clone(), body})
		n := len(e.got)
		e.mu.Unlock()
		code := 200
		if e.status != nil {
			code = e.status(n)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) hits() []hit {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]hit(nil), e.got...)
}

// verified checks every request with the official Standard Webhooks
// library, an implementation apart from ours.
func verified(t *testing.T, secret string, hits []hit) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range hits {
		if err := wh.Verify(h.body, h.header); err != nil {
			t.Fatalf("request %d does not verify: %v", i+1, err)
		}
	}
}

var loopbackSender = webhook.NewSender(netguard.Guard{AllowPrivate: true})

func register(t *testing.T, s store.Webhooks, id, url string, events ...string) store.Webhook {
	t.Helper()
	w, err := s.AddWebhook(context.Background(), store.Webhook{ID: id, URL: url, Events: events, Secret: webhook.NewSecret()})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// An endpoint that answers 503 twice gets the event a third time, through
// the real worker and queue: the same webhook-id and body each time, each
// attempt signed anew (and verified by the official library), delivered
// once, and the endpoint's failures start again from nothing.
func TestWebhookRetriedUntilDelivered(t *testing.T) {
	d := newDelivery(t)
	ep := newEndpoint(t, func(n int) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	hook := register(t, d.store, "crm", ep.srv.URL+"/hooks", tasks.WebhookSubscriberConfirmed)
	register(t, d.store, "other", ep.srv.URL+"/other", tasks.WebhookIssueSent)
	d.notify = &webhooks.Notifier{Endpoints: d.store, Queue: d.client}
	d.post = loopbackSender
	d.hooks = tasks.WebhookBackoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond, Window: time.Hour}
	d.startWorker(t, 1000, 2)

	ev := webhooks.SubscriberEvent(tasks.WebhookSubscriberConfirmed, store.Subscriber{ID: 11, Email: "ann@example.com", ConfirmedAt: time.Now()}, "")
	if err := d.notify.Notify(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	taskID := tasks.WebhookTaskID("crm", ev.ID)
	poll.True(t, 30*time.Second, "the event delivered", func() bool {
		info, err := d.insp.GetTaskInfo(tasks.QueueWebhook, taskID)
		return err == nil && info.State == asynq.TaskStateCompleted
	})
	hits := ep.hits()
	if len(hits) != 3 {
		t.Fatalf("%d requests, want 2 refused and 1 delivered", len(hits))
	}
	body, _ := ev.Body()
	for i, h := range hits {
		if h.header.Get("webhook-id") != ev.ID || string(h.body) != string(body) {
			t.Fatalf("attempt %d: id %s, body %s; want %s and the same body each time", i+1, h.header.Get("webhook-id"), h.body, ev.ID)
		}
	}
	verified(t, hook.Secret, hits)
	if after, _ := d.store.GetWebhook(context.Background(), "crm"); after.Failures != 0 || after.State != store.WebhookActive {
		t.Fatalf("after the delivery: %+v", after)
	}
	d.mu.Lock()
	mailDelays := len(d.delays[""]) // the mail policy records by address; a webhook task has none
	d.mu.Unlock()
	if mailDelays != 0 {
		t.Fatalf("the webhook task was retried on the mail's schedule %d times", mailDelays)
	}
	for result, want := range map[string]float64{"sent": 1, "retry": 2, "dead": 0, "dropped": 0} {
		if got := testutil.ToFloat64(d.metrics.Notifications.WithLabelValues("webhook", result)); got != want {
			t.Errorf("notifications{lane=webhook,result=%s} = %v, want %v", result, got, want)
		}
	}
	// The same event again: its task is kept, nothing is sent twice.
	if err := d.notify.Notify(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if info, err := d.insp.GetTaskInfo(tasks.QueueWebhook, taskID); err != nil || info.State != asynq.TaskStateCompleted {
		t.Fatalf("the repeated event: %+v %v", info, err)
	}
	if n := len(ep.hits()); n != 3 {
		t.Fatalf("%d requests after the event was reported again", n)
	}
}

// A hard bounce at sending makes the subscriber bounced and tells the
// endpoints that asked (subscriber.bounced, source smtp).
func TestHardBounceAtSendingIsAWebhookEvent(t *testing.T) {
	d := newDelivery(t)
	d.smtp.SetScript(func(rcpt string, _ int) *smtptest.Fault {
		return reply(550, smtp.EnhancedCode{5, 1, 1}, "no such user")
	})
	ep := newEndpoint(t, nil)
	hook := register(t, d.store, "bounces", ep.srv.URL, tasks.WebhookSubscriberBounced)
	d.notify = &webhooks.Notifier{Endpoints: d.store, Queue: d.client}
	d.post = loopbackSender
	d.startWorker(t, 1000, 2)
	d.welcome(t, "gone@x.org")
	poll.True(t, 30*time.Second, "the bounce reported to the endpoint", func() bool { return len(ep.hits()) == 1 })
	h := ep.hits()[0]
	verified(t, hook.Secret, []hit{h})
	sub, _ := d.store.Get(context.Background(), "gone@x.org")
	var got struct {
		Type string
		Data tasks.WebhookSubscriberData
	}
	if err := json.Unmarshal(h.body, &got); err != nil || got.Type != tasks.WebhookSubscriberBounced ||
		got.Data != (tasks.WebhookSubscriberData{ID: sub.ID, Email: "gone@x.org", Source: "smtp"}) {
		t.Fatalf("event %s (%v)", h.body, err)
	}
}

// An issue whose sending ends is issue.sent for the endpoints that asked,
// once: a resumed round that ends again is the same event.
func TestIssueSentIsAWebhookEvent(t *testing.T) {
	d := newDelivery(t)
	seed(t, d.store, "r", 20)
	ep := newEndpoint(t, nil)
	hook := register(t, d.store, "site", ep.srv.URL, tasks.WebhookIssueSent)
	d.notify = &webhooks.Notifier{Endpoints: d.store, Queue: d.client}
	d.post = loopbackSender
	d.startWorker(t, 100000, 4)
	is := d.sendIssue(t, store.IssueContent{Subject: "Lanes", Body: "Hello", Topics: []string{topics.Digest}})
	d.waitIssueSent(t, is.ID)
	poll.True(t, 30*time.Second, "issue.sent at the endpoint", func() bool { return len(ep.hits()) == 1 })
	h := ep.hits()[0]
	verified(t, hook.Secret, []hit{h})
	var ev struct {
		Type string
		Data tasks.WebhookIssue
	}
	if err := json.Unmarshal(h.body, &ev); err != nil || ev.Type != tasks.WebhookIssueSent || ev.Data.ID != is.ID ||
		ev.Data.Slug != is.Slug || ev.Data.Subject != "Lanes" || len(ev.Data.Topics) != 1 || ev.Data.Topics[0] != topics.Digest {
		t.Fatalf("event %s (%v)", h.body, err)
	}
	// A second round ends the sending again: no second event.
	if _, err := d.store.TransitionIssue(context.Background(), is.ID, []string{store.IssueSent}, store.IssueSending, store.IssueChange{NewRound: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Enqueue(tasks.NewIssuePlan(is.ID, is.Round+1, time.Now()).Task); err != nil {
		t.Fatal(err)
	}
	d.waitIssueSent(t, is.ID)
	// Every issue task has returned (so any second event is queued), and
	// the webhook queue has nothing left to run.
	idle := func(queue string) func() bool {
		return func() bool {
			q, err := d.insp.GetQueueInfo(queue)
			return err == nil && q.Pending+q.Active+q.Scheduled+q.Retry == 0
		}
	}
	poll.True(t, 30*time.Second, "the issue's tasks done", idle(tasks.QueueOf(tasks.TypeIssueEmail)))
	poll.True(t, 30*time.Second, "the webhook queue idle", idle(tasks.QueueWebhook))
	if n := len(ep.hits()); n != 1 {
		t.Fatalf("issue.sent delivered %d times", n)
	}
}

// handlerRun is one run of the webhook handler outside asynq.
type handlerRun struct {
	t     *testing.T
	clock time.Time
	mem   *store.Redis
	h     *WebhookSender
}

func newHandlerRun(t *testing.T, policy store.WebhookPolicy, backoff tasks.WebhookBackoff) *handlerRun {
	r := &handlerRun{t: t, clock: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	r.mem = newStore(t).WithClock(func() time.Time { return r.clock })
	r.h = NewHandlers(Deps{Store: r.mem, WebhookPost: loopbackSender, WebhookPolicy: policy, WebhookBackoff: backoff,
		Log: discard, Now: func() time.Time { return r.clock }}).Webhooks
	return r
}

func (r *handlerRun) task(endpoint string, subscriberID int64) *asynq.Task {
	ev := webhooks.SubscriberEvent(tasks.WebhookSubscriberConfirmed, store.Subscriber{ID: subscriberID, Email: "p" + strconv.FormatInt(subscriberID, 10) + "@example.com", ConfirmedAt: r.clock}, "")
	body, _ := ev.Body()
	return tasks.NewWebhook(tasks.WebhookPayload{Endpoint: endpoint, ID: ev.ID, Type: ev.Type, Queued: r.clock, Body: string(body)})
}

func (r *handlerRun) count(result string) float64 {
	return testutil.ToFloat64(r.h.Metrics.Notifications.WithLabelValues("webhook", result))
}

func dead(err error) bool {
	return errors.Is(err, asynq.SkipRetry) && errors.Is(err, ErrNotificationDead)
}

// An endpoint that keeps failing is disabled once it has failed often
// enough for long enough (here: 3 times over an hour), its event becomes a
// dead letter, and its later events are dead letters without a request,
// until an admin enables it.
func TestWebhookEndpointDisabledAfterFailingForLong(t *testing.T) {
	r := newHandlerRun(t, store.WebhookPolicy{DisableAfter: time.Hour, MinFailures: 3}, tasks.DefaultWebhookBackoff)
	down := true
	ep := newEndpoint(t, func(int) int {
		if down {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	register(t, r.mem, "crm", ep.srv.URL, tasks.WebhookSubscriberConfirmed)
	ctx := context.Background()
	first := r.task("crm", 1)
	for i := 1; i <= 3; i++ { // 0, 20 and 40 minutes: failing, not for long enough
		err := runTask(ctx, tasks.Webhook, r.h.HandleWebhook, first)
		if err == nil || errors.Is(err, asynq.SkipRetry) {
			t.Fatalf("attempt %d: %v, want a retry", i, err)
		}
		if w, _ := r.mem.GetWebhook(ctx, "crm"); w.State != store.WebhookActive || w.Failures != i {
			t.Fatalf("attempt %d: %+v", i, w)
		}
		r.clock = r.clock.Add(20 * time.Minute)
	}
	if err := runTask(ctx, tasks.Webhook, r.h.HandleWebhook, first); !dead(err) {
		t.Fatalf("after an hour of failing: %v, want a dead letter", err)
	}
	w, _ := r.mem.GetWebhook(ctx, "crm")
	if w.State != store.WebhookDisabled || w.DisabledAt.IsZero() {
		t.Fatalf("after an hour of failing: %+v, want disabled", w)
	}
	if got := testutil.ToFloat64(r.h.Metrics.WebhooksDisabled); got != 1 {
		t.Fatalf("endpoints disabled: %v", got)
	}
	// Later events: dead letters at once, the endpoint is not called.
	before := len(ep.hits())
	if err := runTask(ctx, tasks.Webhook, r.h.HandleWebhook, r.task("crm", 2)); !dead(err) || len(ep.hits()) != before {
		t.Fatalf("an event for a disabled endpoint: %v, %d requests", err, len(ep.hits())-before)
	}
	if r.count("retry") != 3 || r.count("dead") != 2 || r.count("sent") != 0 {
		t.Fatalf("notifications: retry %v, dead %v, sent %v", r.count("retry"), r.count("dead"), r.count("sent"))
	}
	// Enabled and working again: a dead letter re-run is delivered.
	down = false
	if _, err := r.mem.EnableWebhook(ctx, "crm"); err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.Webhook, r.h.HandleWebhook, first); err != nil {
		t.Fatalf("the re-run dead letter: %v", err)
	}
	if w, _ := r.mem.GetWebhook(ctx, "crm"); w.State != store.WebhookActive || w.Failures != 0 {
		t.Fatalf("after the re-run: %+v", w)
	}
}

// An event is retried for the backoff's window from when it was queued,
// then it is a dead letter; the endpoint keeps its count of failures
// (disabling is the endpoint's own policy).
func TestWebhookGivenUpAfterTheWindow(t *testing.T) {
	r := newHandlerRun(t, store.WebhookPolicy{}, tasks.WebhookBackoff{Window: 2 * time.Hour})
	ep := newEndpoint(t, func(int) int { return http.StatusBadGateway })
	register(t, r.mem, "crm", ep.srv.URL, tasks.WebhookSubscriberConfirmed)
	ctx := context.Background()
	task := r.task("crm", 1)
	r.clock = r.clock.Add(119 * time.Minute)
	if err := runTask(ctx, tasks.Webhook, r.h.HandleWebhook, task); err == nil || errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("within the window: %v, want a retry", err)
	}
	r.clock = r.clock.Add(time.Minute)
	if err := runTask(ctx, tasks.Webhook, r.h.HandleWebhook, task); !dead(err) {
		t.Fatalf("at the window's end: %v, want a dead letter", err)
	}
	if w, _ := r.mem.GetWebhook(ctx, "crm"); w.Failures != 2 || w.FailingSince.IsZero() || w.State != store.WebhookActive {
		t.Fatalf("the endpoint after the window: %+v", w)
	}
}

// 410 Gone: the endpoint asked for nothing more; it is disabled at once.
func TestWebhookGoneDisablesAtOnce(t *testing.T) {
	r := newHandlerRun(t, store.WebhookPolicy{}, tasks.WebhookBackoff{})
	ep := newEndpoint(t, func(int) int { return http.StatusGone })
	register(t, r.mem, "crm", ep.srv.URL, tasks.WebhookSubscriberConfirmed)
	if err := runTask(context.Background(), tasks.Webhook, r.h.HandleWebhook, r.task("crm", 1)); !dead(err) {
		t.Fatalf("410: %v, want a dead letter", err)
	}
	if w, _ := r.mem.GetWebhook(context.Background(), "crm"); w.State != store.WebhookDisabled {
		t.Fatalf("after 410: %+v", w)
	}
}

// A secret that cannot sign (webhook.ErrSecret) gives the event up at
// once: no attempt could sign it, and the endpoint is not to blame, so it
// is neither called, counted against nor disabled.
func TestWebhookBadSecretIsADeadLetter(t *testing.T) {
	r := newHandlerRun(t, store.WebhookPolicy{}, tasks.WebhookBackoff{})
	ep := newEndpoint(t, nil)
	ctx := context.Background()
	if _, err := r.mem.AddWebhook(ctx, store.Webhook{ID: "crm", URL: ep.srv.URL, Events: []string{tasks.WebhookSubscriberConfirmed}, Secret: "whsec_short"}); err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.Webhook, r.h.HandleWebhook, r.task("crm", 1)); !dead(err) || len(ep.hits()) != 0 {
		t.Fatalf("a bad secret: %v, %d requests, want a dead letter and none", err, len(ep.hits()))
	}
	if w, _ := r.mem.GetWebhook(ctx, "crm"); w.State != store.WebhookActive || w.Failures != 0 || r.count("dead") != 1 {
		t.Fatalf("after a bad secret: %+v, dead %v", w, r.count("dead"))
	}
}

// The events of a removed endpoint are dropped when they come up.
func TestWebhookRemovedEndpointDropsItsEvents(t *testing.T) {
	r := newHandlerRun(t, store.WebhookPolicy{}, tasks.WebhookBackoff{})
	ep := newEndpoint(t, nil)
	register(t, r.mem, "crm", ep.srv.URL, tasks.WebhookSubscriberConfirmed)
	task := r.task("crm", 1)
	if err := r.mem.DeleteWebhook(context.Background(), "crm"); err != nil {
		t.Fatal(err)
	}
	if err := runTask(context.Background(), tasks.Webhook, r.h.HandleWebhook, task); err != nil || len(ep.hits()) != 0 || r.count("dropped") != 1 {
		t.Fatalf("an event of a removed endpoint: %v, %d requests, dropped %v", err, len(ep.hits()), r.count("dropped"))
	}
}

// The webhook lane's retry delays are its own: the backoff, or the
// endpoint's Retry-After, not the mail's policy.
func TestWebhookRetryDelay(t *testing.T) {
	r := newHandlerRun(t, store.WebhookPolicy{}, tasks.WebhookBackoff{Base: time.Minute, Max: 2 * time.Hour, Window: 24 * time.Hour})
	ctx := context.Background()
	busy := newEndpoint(t, func(int) int { return http.StatusServiceUnavailable })
	register(t, r.mem, "busy", busy.srv.URL, tasks.WebhookSubscriberConfirmed)
	// Nothing listens there, nor will during the test: connection refused.
	register(t, r.mem, "down", "http://"+nettest.RefusedAddr(t), tasks.WebhookSubscriberConfirmed)

	failed := runTask(ctx, tasks.Webhook, r.h.HandleWebhook, r.task("busy", 1))
	if d := r.h.RetryDelay(3, failed, nil); d < 4*time.Minute || d > 8*time.Minute {
		t.Fatalf("fourth retry after a 503: %s, want 4 to 8 minutes", d)
	}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "5400")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer slow.Close()
	register(t, r.mem, "slow", slow.URL, tasks.WebhookSubscriberConfirmed)
	if d := r.h.RetryDelay(0, runTask(ctx, tasks.Webhook, r.h.HandleWebhook, r.task("slow", 1)), nil); d != 90*time.Minute {
		t.Fatalf("Retry-After 5400: %s", d)
	}
	// A refused connection is the endpoint's failure: counted against the
	// retries and retried on the backoff, not in the seconds a Redis
	// outage gets.
	refused := runTask(ctx, tasks.Webhook, r.h.HandleWebhook, r.task("down", 1))
	if refused == nil || !IsFailure(refused) || errors.Is(refused, asynq.SkipRetry) {
		t.Fatalf("a refused connection: %v (counted: %v)", refused, IsFailure(refused))
	}
	if d := r.h.RetryDelay(0, refused, nil); d < 30*time.Second || d > time.Minute {
		t.Fatalf("first retry after a refused connection: %s, want the backoff's 30s to 1m", d)
	}
	if !IsFailure(failed) {
		t.Fatal("a 503 does not count against the retries")
	}
}

// A complaint or bounce report that changes a subscriber is an event for
// the endpoints that asked; a repeated report is not.
func TestFeedbackIsAWebhookEvent(t *testing.T) {
	mem := newStore(t)
	ctx := context.Background()
	for _, e := range []string{"ann@example.com", "bob@example.com"} {
		if _, err := mem.Subscribe(ctx, store.SubscribeRequest{Email: e, Activate: true}); err != nil {
			t.Fatal(err)
		}
	}
	register(t, mem, "crm", "https://crm.example.com/hooks", tasks.WebhookSubscriberBounced, tasks.WebhookSubscriberComplained)
	q := &recordQueue{}
	f := NewHandlers(Deps{Store: mem, Log: discard, Notify: &webhooks.Notifier{Endpoints: mem, Queue: q}}).Feedback
	run := func(p tasks.FeedbackPayload) {
		t.Helper()
		task, err := tasks.NewFeedback(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := runTask(ctx, tasks.Feedback, f.HandleFeedback, task); err != nil {
			t.Fatal(err)
		}
	}
	run(tasks.FeedbackPayload{ID: "r1", Email: "ann@example.com", Type: "complaint", Source: "ses"})
	run(tasks.FeedbackPayload{ID: "r1", Email: "ann@example.com", Type: "complaint", Source: "ses"})
	run(tasks.FeedbackPayload{ID: "r2", Email: "bob@example.com", Type: "soft", Source: "mailgun"})
	run(tasks.FeedbackPayload{ID: "r3", Email: "bob@example.com", Type: "hard", Source: "mailgun"})
	got := q.payloads(t)
	if len(got) != 2 {
		t.Fatalf("%d events, want the complaint and the hard bounce", len(got))
	}
	for i, want := range []struct{ typ, email, source string }{
		{tasks.WebhookSubscriberComplained, "ann@example.com", "ses"},
		{tasks.WebhookSubscriberBounced, "bob@example.com", "mailgun"},
	} {
		var body struct {
			Type string
			Data tasks.WebhookSubscriberData
		}
		if err := json.Unmarshal([]byte(got[i].Body), &body); err != nil {
			t.Fatal(err)
		}
		if got[i].Type != want.typ || body.Type != want.typ || body.Data.Email != want.email || body.Data.Source != want.source || body.Data.ID == 0 {
			t.Fatalf("event %d: %+v %s", i, got[i], got[i].Body)
		}
	}
}

// recordQueue records the webhook tasks queued.
type recordQueue struct {
	mu    sync.Mutex
	tasks []*asynq.Task
}

func (q *recordQueue) EnqueueContext(_ context.Context, t *asynq.Task, _ ...asynq.Option) (*asynq.TaskInfo, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.tasks = append(q.tasks, t)
	return &asynq.TaskInfo{}, nil
}

func (q *recordQueue) payloads(t *testing.T) []tasks.WebhookPayload {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []tasks.WebhookPayload
	for _, task := range q.tasks {
		var p tasks.WebhookPayload
		if task.Type() != tasks.TypeWebhook || json.Unmarshal(task.Payload(), &p) != nil {
			t.Fatalf("queued %s %s", task.Type(), task.Payload())
		}
		out = append(out, p)
	}
	return out
}

// A test event an admin asked for: delivered and logged like any event;
// failing, it is logged with the endpoint's answer, not retried, and not
// counted against the endpoint (a test is no sign the endpoint is dead).
// Every attempt, an event's too, lands in the endpoint's deliveries.
func TestWebhookTestEventLoggedNotCounted(t *testing.T) {
	r := newHandlerRun(t, store.WebhookPolicy{DisableAfter: time.Nanosecond, MinFailures: 1}, tasks.DefaultWebhookBackoff)
	up := true
	ep := newEndpoint(t, func(int) int {
		if up {
			return http.StatusNoContent
		}
		return http.StatusInternalServerError
	})
	hook := register(t, r.mem, "crm", ep.srv.URL, tasks.WebhookSubscriberConfirmed)
	ctx := context.Background()
	ok, p, err := tasks.NewWebhookTest("crm", r.clock)
	if err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.Webhook, r.h.HandleWebhook, ok); err != nil {
		t.Fatalf("a test event to a working endpoint: %v", err)
	}
	verified(t, hook.Secret, ep.hits())
	up = false
	failing, _, _ := tasks.NewWebhookTest("crm", r.clock.Add(time.Second))
	err = runTask(ctx, tasks.Webhook, r.h.HandleWebhook, failing)
	if !errors.Is(err, asynq.SkipRetry) || dead(err) {
		t.Fatalf("a failing test event: %v, want no retry and no dead letter", err)
	}
	if w, _ := r.mem.GetWebhook(ctx, "crm"); w.State != store.WebhookActive || w.Failures != 0 {
		t.Fatalf("a failed test counted against the endpoint: %+v", w)
	}
	// An event fails too: counted (and here, disabled at once).
	if err := runTask(ctx, tasks.Webhook, r.h.HandleWebhook, r.task("crm", 1)); err == nil {
		t.Fatal("an event to a failing endpoint: delivered")
	}
	ds, err := r.mem.WebhookDeliveries(ctx, "crm")
	if err != nil || len(ds) != 3 {
		t.Fatalf("deliveries: %+v %v", ds, err)
	}
	if ds[2].Event != p.ID || !ds[2].OK || ds[2].Status != 204 || !ds[2].Test || ds[2].Type != tasks.WebhookTestType ||
		ds[1].OK || ds[1].Status != 500 || !ds[1].Test || !strings.Contains(ds[1].Error, "500") ||
		ds[0].Test || ds[0].OK || ds[0].Type != tasks.WebhookSubscriberConfirmed || !ds[0].At.Equal(r.clock) {
		t.Fatalf("deliveries, newest first: %+v", ds)
	}
}

// The webhook task's budget (tasks) covers the endpoint's timeout
// (channels/webhook) and the store's round trips around it: two packages
// that do not import each other, held together here.
func TestWebhookTaskOutlastsTheEndpointTimeout(t *testing.T) {
	if tasks.Webhook.Timeout < webhook.DefaultTimeout+10*time.Second {
		t.Fatalf("the webhook task's timeout %s leaves too little beyond the endpoint's %s", tasks.Webhook.Timeout, webhook.DefaultTimeout)
	}
}
