package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/pace"
	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/testkit/redisfault"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// awayEnv is the worker's handlers on one Redis (the store, the send rate,
// the queue and its depth) behind a fault that takes it away on demand.
type awayEnv struct {
	h     Handlers
	rdb   *redis.Client
	st    *store.Redis
	rec   *recorder
	away  *redisfault.Fault
	armed map[string]redisfault.Stats // what away had seen when flaky was called
	flaky int
	queue *asynq.Client
	insp  *asynq.Inspector
}

func newAwayEnv(t *testing.T, wait time.Duration) *awayEnv {
	t.Helper()
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	rdb, _ := redistest.New(t, redistest.DBWorker)
	redisconn.Hold(rdb) // as the service's clients (redisconn.Client), outside the fault
	e := &awayEnv{rdb: rdb, st: store.NewRedis(rdb), rec: &recorder{}, away: redisfault.Add(rdb),
		queue: asynq.NewClientFromRedisClient(rdb), insp: asynq.NewInspectorFromRedisClient(rdb)}
	e.h = NewHandlers(Deps{
		Store: e.st, Mailer: e.rec, Render: render, Log: discard, Metrics: NewMetrics(nil),
		Links: newHandlersLinks(), Pace: pace.New(rdb, 1000), Queue: e.queue, Depth: RedisQueueDepth{Redis: rdb},
		MarkWindow: 2, DigestBatch: 2, RedisWait: wait,
	})
	t.Cleanup(e.h.Close)
	return e
}

// runWaiting is task t handled by fn as a lane runs it: its Redis
// commands waiting out Redis as h says (waitingOutRedis), its payload
// decoded first (runTask).
func runWaiting[P any](ctx context.Context, h Handlers, k tasks.Kind[P], fn func(context.Context, P) error, t *asynq.Task) error {
	return waitingOutRedis(h.RedisWait)(on(k, fn).handler).ProcessTask(ctx, t)
}

// flakyRedis makes each Redis command fail its first n calls from now on,
// as an unreachable Redis does.
func (e *awayEnv) flakyRedis(n int) {
	e.armed, e.flaky = e.away.Seen(), n
	e.away.Flaky(n)
}

// rodeOut checks that every Redis command sent since flakyRedis met the
// outage n times and was sent again until it went through: no step gave
// up, and none went on without its answer.
func (e *awayEnv) rodeOut(t *testing.T) {
	t.Helper()
	met := 0
	for cmd, s := range e.away.Seen() {
		calls, n := s.Calls-e.armed[cmd].Calls, s.Met-e.armed[cmd].Met
		if calls == 0 {
			continue // sent only before the outage
		}
		met++
		if n != e.flaky || calls <= n {
			t.Errorf("%s met the outage %d times in %d calls, want %d and then through", cmd, n, calls, e.flaky)
		}
	}
	if met == 0 {
		t.Error("no Redis command met the outage")
	}
}

// take returns and deletes the tasks queued, in every queue.
func (e *awayEnv) take(t *testing.T) []*asynq.Task {
	t.Helper()
	queues, err := e.insp.Queues()
	if err != nil {
		t.Fatal(err)
	}
	var out []*asynq.Task
	for _, q := range queues {
		for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){e.insp.ListPendingTasks, e.insp.ListScheduledTasks} {
			infos, err := list(q, asynq.PageSize(1000))
			if err != nil {
				t.Fatal(err)
			}
			for _, ti := range infos {
				out = append(out, asynq.NewTask(ti.Type, ti.Payload))
			}
		}
		if _, err := e.insp.DeleteAllPendingTasks(q); err != nil {
			t.Fatal(err)
		}
		if _, err := e.insp.DeleteAllScheduledTasks(q); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// startRun adds an item, starts period's digest run and makes and sends
// its issue (digestIssue).
func startRun(t *testing.T, st *store.Redis, period string) store.Issue {
	t.Helper()
	if _, err := st.AddItem(context.Background(), store.Item{Title: "T", URL: "https://x/t"}); err != nil {
		t.Fatal(err)
	}
	_, is := digestIssue(t, st, period)
	return is
}

// TestBatchRidesOutRedisOutage: every Redis step of a batch of the
// digest's issue (its status and content, the re-read, the outcome of
// who left, the claims, the domain pause, the send rate, the marks, the
// finish) meets an unreachable Redis, and waits for it rather than hand
// the batch back: the batch succeeds, each mail goes out once and is
// recorded.
func TestBatchRidesOutRedisOutage(t *testing.T) {
	e := newAwayEnv(t, 10*time.Second)
	h, mem, rec := e.h, e.st, e.rec
	ctx := context.Background()
	var ids []int64
	for _, e := range []string{"a@x.org", "b@y.org", "c@z.org", "gone@x.org"} {
		ids = append(ids, activate(t, mem, e).ID)
	}
	if _, err := mem.Unsubscribe(ctx, "gone@x.org"); err != nil {
		t.Fatal(err)
	}
	is := startRun(t, mem, "p")
	e.flakyRedis(2)
	if err := runWaiting(ctx, h, tasks.IssueEmail, h.Issues.HandleIssueBatch, issueBatch(is, ids...)); err != nil {
		t.Fatalf("the batch handed itself back: %v", err)
	}
	e.rodeOut(t)
	e.away.Heal()
	run, err := mem.DigestRun(ctx, "p")
	if err != nil || rec.count() != 3 || run.Sent != 3 || run.Skipped != 1 {
		t.Fatalf("%d mails, run %+v %v", rec.count(), run, err)
	}
}

// TestPlannerAndSequenceRideOutRedisOutage: the digest planner's steps
// (the run, its issue, the issue's send, the enqueue of its plan), the
// issue planner's (the progress, the queue's depth, the audience, the
// enqueue, the cursor) and a sequence step's (the re-read, the progress,
// the schedule of the next) wait for Redis too; what they write, they
// write once.
func TestPlannerAndSequenceRideOutRedisOutage(t *testing.T) {
	e := newAwayEnv(t, 10*time.Second)
	h, mem, rec := e.h, e.st, e.rec
	ctx := context.Background()
	for _, addr := range []string{"a@x.org", "b@x.org", "c@x.org"} {
		activate(t, mem, addr)
	}
	if _, err := mem.AddItem(ctx, store.Item{Title: "T", URL: "https://x/t"}); err != nil {
		t.Fatal(err)
	}
	e.take(t) // the welcomes' outbox is not the planner's
	e.flakyRedis(2)
	if err := runWaiting(ctx, h, tasks.DigestPlan, h.Planner.HandleDigestPlan, tasks.NewDigestPlan("p")); err != nil {
		t.Fatalf("the planner handed itself back: %v", err)
	}
	e.rodeOut(t)
	e.away.Heal()
	queued := e.take(t)
	if len(queued) != 1 || queued[0].Type() != tasks.TypeIssuePlan {
		t.Fatalf("the digest queued %v, want its issue's plan", taskTypes(queued))
	}
	e.flakyRedis(2)
	if err := runWaiting(ctx, h, tasks.IssuePlan, h.Issues.HandleIssuePlan, queued[0]); err != nil {
		t.Fatalf("the issue's planner handed itself back: %v", err)
	}
	e.rodeOut(t)
	e.away.Heal()
	run, err := mem.DigestRun(ctx, "p")
	queued = e.take(t)
	// Two batches of the issue's mail, and its one push fan-out.
	if types := taskTypes(queued); err != nil || run.State != store.RunPlanned || run.Planned != 3 || run.Issue == 0 ||
		len(types) != 3 || countOf(types, tasks.TypeIssueEmail) != 2 || countOf(types, tasks.TypeFanout) != 1 {
		t.Fatalf("run %+v %v, %d batches %v", run, err, len(queued), types)
	}
	if list, _ := mem.ListIssues(ctx, "", 0, 10); len(list) != 1 || list[0].Slug != "digest-p" {
		t.Fatalf("issues %+v", list)
	}
	e.flakyRedis(2)
	if err := runWaiting(ctx, h, tasks.WelcomeEmail, h.Sequence.HandleWelcome, tasks.NewWelcome("a@x.org", time.Now(), 0).Task); err != nil {
		t.Fatalf("the welcome handed itself back: %v", err)
	}
	e.rodeOut(t)
	if rec.count() != 1 {
		t.Fatalf("%d welcomes", rec.count())
	}
}

// TestRedisWaitIsBounded: past its bound a step gives up, and the task is
// retried soon, as one that met an unreachable Redis, not as a failure.
// An error that is not about reaching Redis is not waited on at all.
func TestRedisWaitIsBounded(t *testing.T) {
	e := newAwayEnv(t, 200*time.Millisecond)
	h, mem, rec := e.h, e.st, e.rec
	ctx := context.Background()
	sub := activate(t, mem, "a@x.org")
	is := startRun(t, mem, "p")
	before := e.away.Seen()
	e.away.Down()
	err := runWaiting(ctx, h, tasks.IssueEmail, h.Issues.HandleIssueBatch, issueBatch(is, sub.ID))
	if err == nil || IsFailure(err) || (RetryPolicy{}).Delay(0, err, nil) != DefaultRedisAwayRetry || rec.count() != 0 {
		t.Fatalf("after the bound: %v (failure %v), %d mails", err, IsFailure(err), rec.count())
	}
	// The batch's first step (the issue's status) is the only one it reached: it
	// was tried again within its bound.
	sent := 0
	for cmd, s := range e.away.Seen() {
		switch n := s.Calls - before[cmd].Calls; n {
		case 0:
		case 1:
			t.Fatalf("%s was sent once within the bound", cmd)
		default:
			sent++
		}
	}
	if sent == 0 {
		t.Fatal("the batch sent nothing to Redis")
	}

	waiting := redisconn.WaitOut(ctx, h.RedisWait)
	refused := errors.New("ERR the store refused")
	e.away.Refuse(refused, "get")
	gets := e.away.Calls("get")
	if err := e.rdb.Get(waiting, "k").Err(); !errors.Is(err, refused) || e.away.Calls("get") != gets+1 {
		t.Fatalf("%v after %d calls, want the refusal at once", err, e.away.Calls("get")-gets)
	}
	// A task whose time is up stops waiting.
	e.away.Down("get")
	done, cancel := context.WithCancel(waiting)
	cancel()
	gets = e.away.Calls("get")
	if err := e.rdb.Get(done, "k").Err(); err == nil || e.away.Calls("get") > gets+1 {
		t.Fatalf("%v after %d calls, want the error at once", err, e.away.Calls("get")-gets)
	}
}

// TestEnqueueOnce: an enqueue (enqueueOnce) that meets an unreachable
// Redis under a task's context waits for it and queues the task once; a
// TaskID conflict is a task queued already, success; an outage past the
// bound is returned.
func TestEnqueueOnce(t *testing.T) {
	e := newAwayEnv(t, 10*time.Second)
	ctx := redisconn.WaitOut(context.Background(), e.h.RedisWait)
	e.flakyRedis(2)
	if err := enqueueOnce(ctx, e.queue, issueBatch(store.Issue{ID: 1, Round: 1}, 1)); err != nil {
		t.Fatal(err)
	}
	e.rodeOut(t)
	e.away.Heal()
	if got := e.take(t); len(got) != 1 {
		t.Fatalf("%d tasks queued, want 1", len(got))
	}
	// The same TaskID again, while the first is still queued: asynq
	// answers a conflict, once.
	if _, err := e.queue.EnqueueContext(ctx, issueBatch(store.Issue{ID: 1, Round: 1}, 1)); err != nil {
		t.Fatal(err)
	}
	sent := e.away.Calls("evalsha")
	if err := enqueueOnce(ctx, e.queue, issueBatch(store.Issue{ID: 1, Round: 1}, 1)); err != nil || e.away.Calls("evalsha") != sent+1 {
		t.Fatalf("a conflict: %v after %d enqueues", err, e.away.Calls("evalsha")-sent)
	}
	if got := e.take(t); len(got) != 1 {
		t.Fatalf("%d tasks under one TaskID", len(got))
	}
	e.away.Down()
	short := redisconn.WaitOut(context.Background(), redisconn.Wait{For: 100 * time.Millisecond, Log: discard})
	err := enqueueOnce(short, e.queue, issueBatch(store.Issue{ID: 1, Round: 1}, 1))
	e.away.Heal()
	// (asynq hands the outage over as text: only its message tells.)
	if got := e.take(t); !store.Unavailable(err) || len(got) != 0 {
		t.Fatalf("Redis down: %v, %d tasks", err, len(got))
	}
}

// nopPush is a push service that takes every notification.
type nopPush struct{}

func (nopPush) Send(context.Context, webpush.Subscription, []byte, webpush.Options) error { return nil }

// TestPushWaitsOutRedisAsLong: the handlers built from Deps, the push
// lane's with the others, wait out Redis for Deps.RedisWait (one wait for
// every lane, waitingOutRedis), not for the default.
func TestPushWaitsOutRedisAsLong(t *testing.T) {
	h := NewHandlers(Deps{Store: newStore(t), Push: nopPush{}, Log: discard, RedisWait: 7 * time.Second})
	t.Cleanup(h.Close)
	if h.Push == nil || h.RedisWait.For != 7*time.Second {
		t.Fatalf("the handlers wait %v for Redis, want 7s", h.RedisWait.For)
	}
}

// taskTypes names tasks by type, for failure messages.
func taskTypes(ts []*asynq.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Type()
	}
	return out
}

// countOf counts s in list.
func countOf(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}
