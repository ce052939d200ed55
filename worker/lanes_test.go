package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/tasks"
)

// typePushTest stands for the push lane's task type, which the push
// sender registers.
const typePushTest = "push:test"

// gauge counts handlers running at once and the most seen together.
type gauge struct {
	now, most atomic.Int64
	done      atomic.Int64
}

func (g *gauge) enter() {
	n := g.now.Add(1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.now.Add(-1); g.done.Add(1) }

// blocking is a handler that holds its worker until release is closed.
func blocking(g *gauge, release <-chan struct{}) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		g.enter()
		defer g.leave()
		<-release
		return nil
	})
}

func startLanes(t *testing.T, lanes ...Lane) (*Worker, *asynq.Client, *asynq.Inspector) {
	t.Helper()
	rdb, _ := redistest.New(t, redistest.DBWorker)
	w := New(rdb, Config{ShutdownTimeout: 10 * time.Second, PollInterval: 50 * time.Millisecond, Lanes: lanes}, Handlers{})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
	return w, asynq.NewClientFromRedisClient(rdb), asynq.NewInspectorFromRedisClient(rdb)
}

func enqueue(t *testing.T, c *asynq.Client, typ, queue string, n int) {
	t.Helper()
	for i := range n {
		if _, err := c.Enqueue(asynq.NewTask(typ, fmt.Appendf(nil, "%d", i)), asynq.Queue(queue), asynq.MaxRetry(0)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLanePoolIsItsOwn: every push worker is held by a push service that
// never answers, and e-mail still runs at its full concurrency. With one
// shared pool (the worker before lanes) the push tasks took every worker
// and no e-mail ran.
func TestLanePoolIsItsOwn(t *testing.T) {
	const pushWorkers, emailWorkers = 3, 4
	var push, email gauge
	pushHung, emailGate := make(chan struct{}), make(chan struct{})
	// Cleanups run last-in first-out: the handlers are released before
	// the worker shuts down.
	_, client, _ := startLanes(t,
		Lane{Name: tasks.LaneEmail, Concurrency: emailWorkers, Handlers: map[string]asynq.Handler{tasks.TypeConfirmEmail: blocking(&email, emailGate)}},
		Lane{Name: tasks.LanePush, Concurrency: pushWorkers, Handlers: map[string]asynq.Handler{typePushTest: blocking(&push, pushHung)}},
	)
	t.Cleanup(func() { close(pushHung) })
	enqueue(t, client, typePushTest, tasks.QueuePush, 3*pushWorkers)
	poll.True(t, poll.BusyMachine, "every push worker held", func() bool { return push.now.Load() == pushWorkers })

	enqueue(t, client, tasks.TypeConfirmEmail, tasks.QueueTransactional, 2*emailWorkers)
	poll.True(t, poll.BusyMachine, fmt.Sprintf("%d e-mail handlers at once beside the held push lane", emailWorkers),
		func() bool { return email.most.Load() == emailWorkers })
	close(emailGate)
	poll.True(t, poll.BusyMachine, "every e-mail task done", func() bool { return email.done.Load() == 2*emailWorkers })
	if n := push.most.Load(); n != pushWorkers {
		t.Fatalf("%d push handlers ran at once, want the lane's %d", n, pushWorkers)
	}
	if n := email.most.Load(); n != emailWorkers {
		t.Fatalf("%d e-mail handlers ran at once, want the lane's %d", n, emailWorkers)
	}
}

// TestLanesSelectQueues: a worker serving the e-mail lane alone never
// takes a push task, even one it would know how to run; a lane without
// handlers is not started.
func TestLanesSelectQueues(t *testing.T) {
	var email, push gauge
	open := make(chan struct{})
	close(open)
	w, client, insp := startLanes(t,
		Lane{Name: tasks.LaneEmail, Concurrency: 2, Handlers: map[string]asynq.Handler{
			tasks.TypeConfirmEmail: blocking(&email, open),
			typePushTest:           blocking(&push, open),
		}},
		Lane{Name: tasks.LaneWebhook, Concurrency: 2}, // no handlers in this build
	)
	if got := w.Lanes(); !slices.Equal(got, []string{tasks.LaneEmail}) {
		t.Fatalf("lanes served %v, want [email]: a lane without handlers is not started", got)
	}
	pushTask, err := client.Enqueue(asynq.NewTask(typePushTest, nil), asynq.Queue(tasks.QueuePush))
	if err != nil {
		t.Fatal(err)
	}
	hook, err := client.Enqueue(asynq.NewTask("webhook:test", nil), asynq.Queue(tasks.QueueWebhook))
	if err != nil {
		t.Fatal(err)
	}
	// Queued after the push task: once it ran, the worker had its
	// chance at the push queue too.
	enqueue(t, client, tasks.TypeConfirmEmail, tasks.QueueTransactional, 3)
	poll.True(t, poll.BusyMachine, "the e-mail tasks done", func() bool { return email.done.Load() == 3 })
	// A few more of the worker's polls, then look again.
	enqueue(t, client, tasks.TypeConfirmEmail, tasks.QueueLow, 3)
	poll.True(t, poll.BusyMachine, "the low queue's e-mail tasks done", func() bool { return email.done.Load() == 6 })
	if n := push.done.Load(); n != 0 {
		t.Fatalf("the e-mail lane ran %d push tasks", n)
	}
	for _, tk := range []struct{ queue, id string }{{tasks.QueuePush, pushTask.ID}, {tasks.QueueWebhook, hook.ID}} {
		info, err := insp.GetTaskInfo(tk.queue, tk.id)
		if err != nil || info.State != asynq.TaskStatePending {
			t.Fatalf("%s task: %v %v, want still pending", tk.queue, info, err)
		}
	}
}

// grants is a RateLimiter that grants what it is told and counts asks.
type grants struct {
	mu    sync.Mutex
	n     int
	wait  time.Duration
	asked []int
}

func (g *grants) TakeN(_ context.Context, n int) (int, time.Duration, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, n)
	if g.n == 0 {
		return 0, g.wait, nil
	}
	g.n--
	return 1, 0, nil
}

// TestLanePace: a lane's task takes one slot of the lane's rate before it
// runs; with none free for long it is handed back to its queue, not run
// and not counted as a failure.
func TestLanePace(t *testing.T) {
	g := &grants{n: 1, wait: time.Hour}
	ran := 0
	h := paceLane(g)(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { ran++; return nil }))
	task := asynq.NewTask(typePushTest, nil)
	if err := h.ProcessTask(context.Background(), task); err != nil || ran != 1 {
		t.Fatalf("with a slot free: %v, ran %d", err, ran)
	}
	err := h.ProcessTask(context.Background(), task)
	var d *Deferred
	if !errors.As(err, &d) || d.In != time.Hour || IsFailure(err) || ran != 1 {
		t.Fatalf("with the rate spent for an hour: %v (failure %v), ran %d; want deferred an hour, not run", err, IsFailure(err), ran)
	}
	if !slices.Equal(g.asked, []int{1, 1}) {
		t.Fatalf("asked the rate for %v, want one slot per task", g.asked)
	}
}
