package webhooks

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/webhook"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redisfault"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// queued records what is enqueued.
type queued struct {
	mu    sync.Mutex
	tasks []*asynq.Task
}

func (q *queued) EnqueueContext(_ context.Context, t *asynq.Task, _ ...asynq.Option) (*asynq.TaskInfo, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.tasks = append(q.tasks, t)
	return &asynq.TaskInfo{}, nil
}

func (q *queued) take() []*asynq.Task {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.tasks
	q.tasks = nil
	return out
}

func addHook(t *testing.T, s store.Webhooks, id string, events ...string) {
	t.Helper()
	if _, err := s.AddWebhook(context.Background(), store.Webhook{ID: id, URL: "https://hooks.example.com/" + id, Events: events, Secret: webhook.NewSecret()}); err != nil {
		t.Fatal(err)
	}
}

// An event goes to each active endpoint that wants its type, as one task
// per endpoint under the event's id; the list of endpoints is read once
// per TTL, however many events there are, and again at once after Forget.
func TestWebhookNotifier(t *testing.T) {
	ctx := context.Background()
	rdb, _ := redistest.Own(t, redistest.DBWebhooks)
	away := redisfault.Add(rdb)
	mem := store.NewRedis(rdb)
	// The endpoint list is read with one ZRANGE (then a pipeline of the
	// endpoints, if any).
	reads := func() int { return away.Calls("zrange") }
	q := &queued{}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := &Notifier{Endpoints: mem, Queue: q, TTL: time.Minute, Now: func() time.Time { return now },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sub := store.Subscriber{ID: 5, Email: "ann@example.com", ConfirmedAt: now}
	confirmed := SubscriberEvent(tasks.WebhookSubscriberConfirmed, sub, "")

	// No endpoint: nothing queued, and the next events within the TTL
	// cost no read.
	for range 100 {
		if err := n.Notify(ctx, confirmed); err != nil {
			t.Fatal(err)
		}
	}
	if got := q.take(); len(got) != 0 || reads() != 1 {
		t.Fatalf("no endpoints: %d tasks, %d reads of the list; want 0 and 1", len(got), reads())
	}

	addHook(t, mem, "crm", tasks.WebhookSubscriberConfirmed, tasks.WebhookSubscriberUnsubscribed)
	addHook(t, mem, "audit", tasks.WebhookSubscriberConfirmed, tasks.WebhookIssueSent)
	addHook(t, mem, "bounces", tasks.WebhookSubscriberBounced)
	addHook(t, mem, "off", tasks.WebhookSubscriberConfirmed)
	if _, err := mem.DisableWebhook(ctx, "off"); err != nil {
		t.Fatal(err)
	}
	must(t, n.Notify(ctx, confirmed))
	if got := q.take(); len(got) != 0 {
		t.Fatalf("%d tasks from a list cached before the endpoints were added", len(got))
	}
	n.Forget()
	must(t, n.Notify(ctx, confirmed))
	got := q.take()
	if len(got) != 2 {
		t.Fatalf("%d tasks, want one for crm and one for audit", len(got))
	}
	body, _ := confirmed.Body()
	// One task per endpoint, in whatever order the store lists them.
	seen := map[string]bool{}
	for i := range got {
		var p tasks.WebhookPayload
		if err := json.Unmarshal(got[i].Payload(), &p); err != nil {
			t.Fatal(err)
		}
		if got[i].Type() != tasks.TypeWebhook || p.ID != confirmed.ID || p.Body != string(body) || !p.Queued.Equal(now) {
			t.Fatalf("task %d: %s %+v", i, got[i].Type(), p)
		}
		seen[p.Endpoint] = true
	}
	if !seen["crm"] || !seen["audit"] {
		t.Fatalf("tasks for %v, want crm and audit", seen)
	}

	// Another type: only the endpoint that wants it.
	must(t, n.Notify(ctx, SubscriberEvent(tasks.WebhookSubscriberBounced, sub, "smtp")))
	if got := q.take(); len(got) != 1 {
		t.Fatalf("subscriber.bounced: %d tasks, want 1", len(got))
	}

	// The list expires with the TTL; a failed read then uses the last
	// list rather than losing the event.
	before := reads()
	now = now.Add(time.Minute)
	away.Down()
	must(t, n.Notify(ctx, confirmed))
	if got := q.take(); len(got) != 2 || reads() != before+1 {
		t.Fatalf("with Redis away: %d tasks, %d reads", len(got), reads()-before)
	}
	// With no list at all, the failure is the caller's to log.
	cold := &Notifier{Endpoints: mem, Queue: q}
	if err := cold.Notify(ctx, confirmed); err == nil {
		t.Fatal("a notifier that could never read the endpoints reported nothing")
	}
	var none *Notifier
	if err := none.Notify(ctx, confirmed); err != nil {
		t.Fatalf("a nil notifier: %v", err)
	}
	none.Forget()
	none.NotifyLogged(ctx, confirmed)
}

// The task of an event for an endpoint is queued once: a second report of
// the same event, while the first waits and after it was delivered, is a
// task id conflict, never a second delivery.
func TestWebhookTaskOncePerEndpoint(t *testing.T) {
	rdb, _ := redistest.Own(t, redistest.DBWebhooks)
	ctx := context.Background()
	st := store.NewRedis(rdb)
	client := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	addHook(t, st, "crm", tasks.WebhookSubscriberConfirmed)
	addHook(t, st, "audit", tasks.WebhookSubscriberConfirmed)
	n := &Notifier{Endpoints: st, Queue: client}
	ev := SubscriberEvent(tasks.WebhookSubscriberConfirmed, store.Subscriber{ID: 9, Email: "b@example.com", ConfirmedAt: time.Now()}, "")
	for range 3 {
		must(t, n.Notify(ctx, ev))
	}
	pending, err := insp.ListPendingTasks(tasks.QueueWebhook)
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending %d (%v), want one per endpoint", len(pending), err)
	}
	info, err := insp.GetTaskInfo(tasks.QueueWebhook, tasks.WebhookTaskID("crm", ev.ID))
	if err != nil || info.MaxRetry != tasks.DefaultWebhookBackoff.MaxRetry() || info.Retention != 24*time.Hour {
		t.Fatalf("task: %+v %v", info, err)
	}
	// Delivered: the task is kept for a day, so the same event reported
	// again is still no second delivery.
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: map[string]int{tasks.QueueWebhook: 1}, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc(tasks.TypeWebhook, func(context.Context, *asynq.Task) error { return nil })
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 30*time.Second, "both tasks completed", func() bool {
		done, _ := insp.ListCompletedTasks(tasks.QueueWebhook)
		return len(done) == 2
	})
	srv.Shutdown()
	must(t, n.Notify(ctx, ev))
	if pending, _ := insp.ListPendingTasks(tasks.QueueWebhook); len(pending) != 0 {
		t.Fatalf("the event was queued again after its delivery: %d pending", len(pending))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
