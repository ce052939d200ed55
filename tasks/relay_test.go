package tasks

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
)

// flaky fails its first n enqueues, as a Redis blip or a process killed
// between the store write and the enqueue would.
type flaky struct {
	Enqueuer
	n int
}

func (f *flaky) EnqueueContext(ctx context.Context, t *asynq.Task, o ...asynq.Option) (*asynq.TaskInfo, error) {
	if f.n > 0 {
		f.n--
		return nil, errors.New("connection reset by peer")
	}
	return f.Enqueuer.EnqueueContext(ctx, t, o...)
}

func TestRelayEnqueuesWhatTheAPIFailedTo(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBTasks)
	ctx := context.Background()
	st := store.NewRedis(rdb)
	client := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	q := &flaky{Enqueuer: client, n: 1}

	now := time.Now()
	job := NewWelcome("ann@example.com", now, time.Hour)
	if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: "ann@example.com", Activate: true, Outbox: job.Outbox()}); err != nil {
		t.Fatal(err)
	}
	if _, err := Dispatch(ctx, q, st, job); err == nil {
		t.Fatal("the scripted enqueue failure was not reported")
	}
	if _, err := insp.GetTaskInfo(QueueDefault, job.ID); err == nil {
		t.Fatal("task exists although its enqueue failed")
	}

	relay := &Relay{Store: st, Queue: q, Log: discard, Grace: time.Second}
	// Before the entry is due (plus grace) the relay leaves it alone.
	if n, err := relay.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("relay took an entry before it was due: %d %v", n, err)
	}
	relay.Now = func() time.Time { return now.Add(time.Hour + 2*time.Second) }
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("relay: %d %v", n, err)
	}
	info, err := insp.GetTaskInfo(QueueDefault, job.ID)
	if err != nil || info.Type != TypeWelcomeEmail || info.MaxRetry != 5 || info.Timeout != 2*time.Minute {
		t.Fatalf("relayed task: %+v %v", info, err)
	}
	// The entry is gone; a second scan (another worker's relay) does nothing.
	if n, _ := relay.RunOnce(ctx); n != 0 {
		t.Fatalf("entry relayed twice: %d", n)
	}
}

func TestDispatchConflictIsDuplicate(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBTasks)
	ctx := context.Background()
	st := store.NewRedis(rdb)
	client := asynq.NewClientFromRedisClient(rdb)
	job := NewConfirm("a@example.com", time.Now())
	if dup, err := Dispatch(ctx, client, st, job); dup || err != nil {
		t.Fatalf("first: %v %v", dup, err)
	}
	if dup, err := Dispatch(ctx, client, st, NewConfirm("a@example.com", time.Now())); !dup || err != nil {
		t.Fatalf("second while the first is pending: dup=%v err=%v", dup, err)
	}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// failingCleaner is an outbox whose clean-up fails, as with Redis gone right
// after the enqueue.
type failingCleaner struct{}

func (failingCleaner) OutboxDone(context.Context, ...string) error {
	return errors.New("redis: connection refused")
}

func TestDispatchReportsAnEntryLeftBehind(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBTasks)
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	job := NewConfirm("left@example.com", time.Now())
	dup, err := Dispatch(ctx, client, failingCleaner{}, job)
	if dup || !errors.Is(err, ErrOutboxLeft) {
		t.Fatalf("dup=%v err=%v, want ErrOutboxLeft", dup, err)
	}
	if _, err := insp.GetTaskInfo(QueueTransactional, job.ID); err != nil {
		t.Fatalf("the task was not enqueued: %v", err)
	}
}

func TestRelayDropsUnreadableEntries(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBTasks)
	ctx := context.Background()
	st := store.NewRedis(rdb)
	bad := outbox.Entry{ID: "confirm:x@example.com", Due: time.Now().Add(-time.Hour), Body: []byte("{not json")}
	if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: "x@example.com", Outbox: bad}); err != nil {
		t.Fatal(err)
	}
	relay := &Relay{Store: st, Queue: asynq.NewClientFromRedisClient(rdb), Log: discard, Grace: time.Second}
	if n, err := relay.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("relay: %d %v", n, err)
	}
	if due, err := st.OutboxDue(ctx, time.Now(), 10); err != nil || len(due) != 0 {
		t.Fatalf("the unreadable entry is still there: %+v %v", due, err)
	}
}
