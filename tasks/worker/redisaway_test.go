package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/push"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/store/memstore"
	"github.com/newsletter/newsletter/tasks"
)

// outage makes every Redis step fail as an unreachable Redis does (the
// dial is refused) the first `fails` times that step is called; fails < 0:
// every time.
type outage struct {
	mu    sync.Mutex
	fails int
	calls map[string]int
}

func newOutage(fails int) *outage { return &outage{fails: fails, calls: map[string]int{}} }

func (o *outage) hit(step string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[step]++
	if o.fails < 0 || o.calls[step] <= o.fails {
		return fmt.Errorf("%s: dial tcp 127.0.0.1:6379: %w", step, syscall.ECONNREFUSED)
	}
	return nil
}

// waited lists the steps that met the outage and were called again.
func (o *outage) waited() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for step, n := range o.calls {
		if n > 1 {
			out[step] = n
		}
	}
	return out
}

// awayStore is the in-memory store behind an outage.
type awayStore struct {
	*memstore.Memory
	o *outage
}

func (a awayStore) Get(ctx context.Context, email string) (store.Subscriber, error) {
	if err := a.o.hit("get"); err != nil {
		return store.Subscriber{}, err
	}
	return a.Memory.Get(ctx, email)
}

func (a awayStore) ClaimMarks(ctx context.Context, owner string, marks []store.Mark, ttl time.Duration) ([]store.Claim, error) {
	if err := a.o.hit("claim"); err != nil {
		return nil, err
	}
	return a.Memory.ClaimMarks(ctx, owner, marks, ttl)
}

func (a awayStore) MarkSent(ctx context.Context, marks ...store.Mark) error {
	if err := a.o.hit("mark"); err != nil {
		return err
	}
	return a.Memory.MarkSent(ctx, marks...)
}

func (a awayStore) SentMarks(ctx context.Context, marks []store.Mark) ([]bool, error) {
	if err := a.o.hit("sent marks"); err != nil {
		return nil, err
	}
	return a.Memory.SentMarks(ctx, marks)
}

func (a awayStore) SubscribersByID(ctx context.Context, ids []int64) ([]store.Subscriber, error) {
	if err := a.o.hit("by id"); err != nil {
		return nil, err
	}
	return a.Memory.SubscribersByID(ctx, ids)
}

func (a awayStore) DigestRun(ctx context.Context, period string) (store.DigestRun, error) {
	if err := a.o.hit("run"); err != nil {
		return store.DigestRun{}, err
	}
	return a.Memory.DigestRun(ctx, period)
}

func (a awayStore) SetOutcome(ctx context.Context, period, outcome string, ids ...int64) error {
	if err := a.o.hit("outcome"); err != nil {
		return err
	}
	return a.Memory.SetOutcome(ctx, period, outcome, ids...)
}

func (a awayStore) StartDigestRun(ctx context.Context, period string) (store.DigestRun, bool, error) {
	if err := a.o.hit("start"); err != nil {
		return store.DigestRun{}, false, err
	}
	return a.Memory.StartDigestRun(ctx, period)
}

func (a awayStore) AudienceAfter(ctx context.Context, topic string, cursor int64, limit int) ([]int64, error) {
	if err := a.o.hit("audience"); err != nil {
		return nil, err
	}
	return a.Memory.AudienceAfter(ctx, topic, cursor, limit)
}

func (a awayStore) AdvanceDigestRun(ctx context.Context, period string, cursor int64, n int, done bool) error {
	if err := a.o.hit("advance"); err != nil {
		return err
	}
	return a.Memory.AdvanceDigestRun(ctx, period, cursor, n, done)
}

func (a awayStore) DigestIssue(ctx context.Context, period string, c store.IssueContent) (store.Issue, error) {
	if err := a.o.hit("digest issue"); err != nil {
		return store.Issue{}, err
	}
	return a.Memory.DigestIssue(ctx, period, c)
}

func (a awayStore) TransitionIssue(ctx context.Context, id int64, from []string, to string, ch store.IssueChange) (store.Issue, error) {
	if err := a.o.hit("transition"); err != nil {
		return store.Issue{}, err
	}
	return a.Memory.TransitionIssue(ctx, id, from, to, ch)
}

func (a awayStore) IssueProgress(ctx context.Context, id int64) (store.IssueProgress, error) {
	if err := a.o.hit("progress"); err != nil {
		return store.IssueProgress{}, err
	}
	return a.Memory.IssueProgress(ctx, id)
}

func (a awayStore) AdvanceIssuePlan(ctx context.Context, id int64, round int, cursor int64, n int, done bool) error {
	if err := a.o.hit("advance"); err != nil {
		return err
	}
	return a.Memory.AdvanceIssuePlan(ctx, id, round, cursor, n, done)
}

// awayPacer paces nothing, behind an outage.
type awayPacer struct{ o *outage }

func (a awayPacer) TakeN(_ context.Context, n int) (int, time.Duration, error) {
	if err := a.o.hit("send rate"); err != nil {
		return 0, 0, fmt.Errorf("send rate: %w", err)
	}
	return n, 0, nil
}

func (a awayPacer) DomainWait(context.Context, string) (time.Duration, error) {
	return 0, a.o.hit("domain pause")
}

func (a awayPacer) Throttle(context.Context, string, time.Duration) error {
	return a.o.hit("throttle")
}

// awayQueue records what is enqueued, behind an outage.
type awayQueue struct {
	o     *outage
	mu    sync.Mutex
	tasks []*asynq.Task
}

func (q *awayQueue) EnqueueContext(_ context.Context, t *asynq.Task, _ ...asynq.Option) (*asynq.TaskInfo, error) {
	if err := q.o.hit("enqueue"); err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.tasks = append(q.tasks, t)
	return &asynq.TaskInfo{}, nil
}

type awayDepth struct{ o *outage }

func (d awayDepth) Pending(context.Context, string) (int, error) { return 0, d.o.hit("depth") }

func newAwayHandlers(t *testing.T, o *outage, wait time.Duration) (Handlers, *memstore.Memory, *recorder, *awayQueue) {
	t.Helper()
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	mem, rec, q := memstore.New(), &recorder{}, &awayQueue{o: o}
	h := NewHandlers(Deps{
		Store: awayStore{mem, o}, Mailer: rec, Render: render, Log: discard, Metrics: NewMetrics(nil),
		Links: newHandlersLinks(), Pace: awayPacer{o}, Queue: q, Depth: awayDepth{o},
		MarkWindow: 2, DigestBatch: 2, RedisWait: wait,
	})
	t.Cleanup(h.Close)
	return h, mem, rec, q
}

// TestBatchRidesOutRedisOutage: every Redis step of a digest batch (the
// run, the re-read, the outcome of who left, the claims, the domain pause,
// the send rate, the marks) meets an unreachable Redis, and waits for it
// rather than hand the batch back: the batch succeeds, each mail goes out
// once and is recorded.
func TestBatchRidesOutRedisOutage(t *testing.T) {
	o := newOutage(2)
	h, mem, rec, _ := newAwayHandlers(t, o, 10*time.Second)
	ctx := context.Background()
	var ids []int64
	for _, e := range []string{"a@x.org", "b@y.org", "c@z.org", "gone@x.org"} {
		ids = append(ids, activate(t, mem, e).ID)
	}
	if _, err := mem.Unsubscribe(ctx, "gone@x.org"); err != nil {
		t.Fatal(err)
	}
	mem.AddItem(ctx, store.Item{Title: "T", URL: "https://x/t"})
	mem.StartDigestRun(ctx, "p")
	if err := h.Batches.HandleDigestBatch(ctx, tasks.NewDigestBatch("p", ids)); err != nil {
		t.Fatalf("the batch handed itself back: %v", err)
	}
	run, err := mem.DigestRun(ctx, "p")
	if err != nil || rec.count() != 3 || run.Sent != 3 || run.Skipped != 1 {
		t.Fatalf("%d mails, run %+v %v", rec.count(), run, err)
	}
	for _, step := range []string{"run", "by id", "outcome", "claim", "domain pause", "send rate", "mark"} {
		if o.waited()[step] == 0 {
			t.Errorf("step %q never met the outage: %v", step, o.waited())
		}
	}
}

// TestPlannerAndSequenceRideOutRedisOutage: the digest planner's steps
// (the run, its issue, the issue's send, the enqueue of its plan), the
// issue planner's (the progress, the queue's depth, the audience, the
// enqueue, the cursor) and a sequence step's (the re-read, the progress,
// the schedule of the next) wait for Redis too; what they write, they
// write once.
func TestPlannerAndSequenceRideOutRedisOutage(t *testing.T) {
	o := newOutage(2)
	h, mem, rec, q := newAwayHandlers(t, o, 10*time.Second)
	ctx := context.Background()
	for _, e := range []string{"a@x.org", "b@x.org", "c@x.org"} {
		activate(t, mem, e)
	}
	mem.AddItem(ctx, store.Item{Title: "T", URL: "https://x/t"})
	if err := h.Planner.HandleDigestPlan(ctx, tasks.NewDigestPlan("p")); err != nil {
		t.Fatalf("the planner handed itself back: %v", err)
	}
	if len(q.tasks) != 1 || q.tasks[0].Type() != tasks.TypeIssuePlan {
		t.Fatalf("the digest queued %d tasks, want its issue's plan", len(q.tasks))
	}
	plan := q.tasks[0]
	q.tasks = nil
	if err := h.Issues.HandleIssuePlan(ctx, plan); err != nil {
		t.Fatalf("the issue's planner handed itself back: %v", err)
	}
	run, err := mem.DigestRun(ctx, "p")
	// Two batches of the issue's mail, and its one push fan-out.
	if types := taskTypes(q.tasks); err != nil || run.State != store.RunPlanned || run.Planned != 3 || run.Issue == 0 ||
		len(types) != 3 || countOf(types, tasks.TypeIssueEmail) != 2 || countOf(types, tasks.TypeFanout) != 1 {
		t.Fatalf("run %+v %v, %d batches %v", run, err, len(q.tasks), taskTypes(q.tasks))
	}
	if list, _ := mem.ListIssues(ctx, "", 0, 10); len(list) != 1 || list[0].Slug != "digest-p" {
		t.Fatalf("issues %+v", list)
	}
	q.tasks = nil
	if err := h.Sequence.HandleWelcome(ctx, tasks.NewWelcome("a@x.org", time.Now(), 0).Task); err != nil {
		t.Fatalf("the welcome handed itself back: %v", err)
	}
	if rec.count() != 1 {
		t.Fatalf("%d welcomes", rec.count())
	}
	for _, step := range []string{"start", "digest issue", "transition", "progress", "depth", "audience", "enqueue", "advance", "get", "sent marks"} {
		if o.waited()[step] == 0 {
			t.Errorf("step %q never met the outage: %v", step, o.waited())
		}
	}
}

// TestRedisWaitIsBounded: past its bound a step gives up, and the task is
// retried soon, as one that met an unreachable Redis, not as a failure.
// An error that is not about reaching Redis is not waited on at all.
func TestRedisWaitIsBounded(t *testing.T) {
	o := newOutage(-1)
	h, mem, rec, _ := newAwayHandlers(t, o, 200*time.Millisecond)
	ctx := context.Background()
	sub := activate(t, mem, "a@x.org")
	mem.AddItem(ctx, store.Item{Title: "T", URL: "https://x/t"})
	mem.StartDigestRun(ctx, "p")
	err := h.Batches.HandleDigestBatch(ctx, tasks.NewDigestBatch("p", []int64{sub.ID}))
	if err == nil || IsFailure(err) || (RetryPolicy{}).Delay(0, err, nil) != DefaultRedisAwayRetry || rec.count() != 0 {
		t.Fatalf("after the bound: %v (failure %v), %d mails", err, IsFailure(err), rec.count())
	}
	if n := o.waited()["run"]; n < 2 {
		t.Fatalf("the step ran %d times within its bound", n)
	}

	calls := 0
	_, err = awaitRedis(ctx, redisWait{Log: discard}, "test", func(context.Context) (int, error) {
		calls++
		return 0, store.ErrNotFound
	})
	if !errors.Is(err, store.ErrNotFound) || calls != 1 {
		t.Fatalf("%v after %d calls, want ErrNotFound at once", err, calls)
	}
	// A task whose time is up stops waiting.
	done, cancel := context.WithCancel(ctx)
	cancel()
	calls = 0
	_, err = awaitRedis(done, redisWait{Log: discard}, "test", func(context.Context) (int, error) {
		calls++
		return 0, syscall.ECONNREFUSED
	})
	if !errors.Is(err, syscall.ECONNREFUSED) || calls != 1 {
		t.Fatalf("%v after %d calls, want the error at once", err, calls)
	}
}

// conflictQueue answers every enqueue as asynq does for a TaskID already
// queued.
type conflictQueue struct{ calls int }

func (q *conflictQueue) EnqueueContext(context.Context, *asynq.Task, ...asynq.Option) (*asynq.TaskInfo, error) {
	q.calls++
	return nil, asynq.ErrTaskIDConflict
}

// TestEnqueueOnce: an enqueue that meets an unreachable Redis waits for it
// and queues the task once; a TaskID conflict is a task queued already,
// success; an outage past the bound is returned.
func TestEnqueueOnce(t *testing.T) {
	ctx := context.Background()
	w := redisWait{For: 10 * time.Second, Log: discard}
	o := newOutage(2)
	q := &awayQueue{o: o}
	if err := enqueueOnce(ctx, w, q, tasks.NewDigestBatch("p", []int64{1})); err != nil || len(q.tasks) != 1 || o.waited()["enqueue"] != 3 {
		t.Fatalf("%v: %d tasks after %v", err, len(q.tasks), o.waited())
	}
	c := &conflictQueue{}
	if err := enqueueOnce(ctx, w, c, tasks.NewDigestBatch("p", []int64{1})); err != nil || c.calls != 1 {
		t.Fatalf("a conflict: %v after %d calls", err, c.calls)
	}
	down := &awayQueue{o: newOutage(-1)}
	err := enqueueOnce(ctx, redisWait{For: 100 * time.Millisecond, Log: discard}, down, tasks.NewDigestBatch("p", []int64{1}))
	if !errors.Is(err, syscall.ECONNREFUSED) || len(down.tasks) != 0 {
		t.Fatalf("Redis down: %v, %d tasks", err, len(down.tasks))
	}
}

// nopPush is a push service that takes every notification.
type nopPush struct{}

func (nopPush) Send(context.Context, push.Subscription, []byte, push.Options) error { return nil }

// TestPushWaitsOutRedisAsLong: the push lane built from Deps waits out
// Redis for Deps.RedisWait, as every other handler does, not for the
// default.
func TestPushWaitsOutRedisAsLong(t *testing.T) {
	h := NewHandlers(Deps{Store: memstore.New(), Push: nopPush{}, Log: discard, RedisWait: 7 * time.Second})
	t.Cleanup(h.Close)
	if h.Push == nil || h.Push.away().For != 7*time.Second {
		t.Fatalf("push lane waits %v for Redis, want 7s", h.Push.away().For)
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
