package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/services/csvimport"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// brokenCSV is the publisher's file: a header and 2,005 rows, the row on
// line 51 with a quote that never closes, and a legit quoted field with a
// comma further down.
func brokenCSV() []byte {
	var b strings.Builder
	b.WriteString("email,name,timezone\n")
	for line := 2; line <= 2006; line++ {
		switch line {
		case 51:
			fmt.Fprintf(&b, "r%04d@example.com,\"Broken Quote,Europe/Berlin\n", line)
		case 60:
			fmt.Fprintf(&b, "\"r%04d@example.com\",\"Smith, J\",Europe/Berlin\n", line)
		default:
			fmt.Fprintf(&b, "r%04d@example.com,Person %d,Europe/Berlin\n", line, line)
		}
	}
	return []byte(b.String())
}

// gateStore is the real store, but its call number stopAt waits for the
// task's context to end and writes nothing: the worker is stopped there,
// right after a checkpoint. It counts the rows it was given.
type gateStore struct {
	*store.Redis
	stopAt  int
	calls   atomic.Int32
	rows    atomic.Int64
	reached chan struct{}
	once    sync.Once
}

func (g *gateStore) SubscribeMany(ctx context.Context, reqs []store.SubscribeRequest) ([]error, error) {
	if int(g.calls.Add(1)) == g.stopAt {
		g.once.Do(func() { close(g.reached) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	g.rows.Add(int64(len(reqs)))
	return g.Redis.SubscribeMany(ctx, reqs)
}

type importEnv struct {
	rdb    *redis.Client
	st     *store.Redis
	jobs   *csvimport.Jobs
	client *asynq.Client
	trail  *audit.Trail
}

func newImportEnv(t *testing.T) *importEnv {
	rdb, _ := redistest.New(t, redistest.DBWorker)
	st := store.NewRedis(rdb)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return &importEnv{rdb: rdb, st: st, jobs: csvimport.NewJobs(rdb), client: asynq.NewClientFromRedisClient(rdb),
		trail: audit.NewTrail(st, logredact.New([]byte("import-secret")), log, nil)}
}

// startWorker runs a worker with the import handler on s.
func (e *importEnv) startWorker(t *testing.T, s csvimport.Store, batch int) *Worker {
	t.Helper()
	runner := NewHandlers(Deps{Imports: e.jobs, ImportStore: s, Queue: e.client, Audit: e.trail, Log: discard}).Imports
	runner.Batch = batch
	w := New(e.rdb, Config{ShutdownTimeout: 200 * time.Millisecond, PollInterval: 50 * time.Millisecond, Log: discard,
		Lanes: []Lane{{Name: tasks.LaneEmail, Concurrency: 2}}},
		Handlers{Imports: runner})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	return w
}

// upload stores data as the console does and queues its task.
func (e *importEnv) upload(t *testing.T, data []byte) string {
	t.Helper()
	lines, err := csvimport.CountLines(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	id := csvimport.NewJobID()
	if err := e.jobs.Create(t.Context(), id, csvimport.Job{File: "list.csv", Size: int64(len(data)), By: "alice", Role: "admin", Lines: lines}, data); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Enqueue(tasks.NewImportRun(id)); err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *importEnv) waitEnd(t *testing.T, id string) csvimport.Status {
	t.Helper()
	var s csvimport.Status
	poll.Until(t, poll.BusyMachine, func() error {
		var err error
		if s, err = e.jobs.Status(context.Background(), id); err != nil {
			return err
		}
		if s.State == csvimport.StateRunning {
			return fmt.Errorf("still running at line %d", s.Line)
		}
		return nil
	})
	return s
}

// checkBrokenFile holds the totals of brokenCSV: every line accounted
// for, line 51 rejected with its reason, 2,004 people stored once. A
// busy machine may fail a batch (a Redis timeout) after it stored some of
// its rows: the retry reads the batch again and counts those as already
// present, so added and present together are 2,004.
func (e *importEnv) checkBrokenFile(t *testing.T, s csvimport.Status) {
	t.Helper()
	if s.State != csvimport.StateDone || s.Lines != 2006 || s.Line != 2006 || s.Header != 1 || s.Read != 2005 ||
		s.Added+s.Present != 2004 || s.RejectedTotal != 1 || len(s.Rejected) != 1 {
		t.Fatalf("status %+v", s)
	}
	if r := s.Rejected[0]; r.Line != 51 || !strings.Contains(r.Reason, "unbalanced quote") {
		t.Fatalf("rejected %+v, want line 51, an unbalanced quote", r)
	}
	for _, addr := range []string{"r0050@example.com", "r0052@example.com", "r0060@example.com", "r2006@example.com"} {
		if _, err := e.st.Get(context.Background(), addr); err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
	}
	if sub, _ := e.st.Get(context.Background(), "r0060@example.com"); sub.Name != "Smith, J" {
		t.Fatalf("quoted name read as %q", sub.Name)
	}
	if _, err := e.st.Get(context.Background(), "r0051@example.com"); err == nil {
		t.Fatal("the broken line was imported")
	}
	stats, err := e.st.Stats(context.Background(), 0)
	if err != nil || stats.ByStatus[store.Active] != 2004 || stats.ByStatus[store.Pending] != 0 {
		t.Fatalf("subscribers stored: %v (%v), want 2004 active", stats.ByStatus, err)
	}
	entries, err := e.st.AuditEntries(context.Background(), "", 10)
	if err != nil || len(entries) != 1 || entries[0].Action != audit.Imported || entries[0].Actor != "alice" ||
		!strings.Contains(entries[0].Detail, fmt.Sprintf("2005 rows read: %d added as active, %d already present, 0 erased skipped, 1 rejected", s.Added, s.Present)) {
		t.Fatalf("audit %+v %v, want one entry with the true counts", entries, err)
	}
}

// The publisher's file through the console's path: stored, then read by
// a worker's import:run task. The broken quote on line 51 costs line 51,
// not the 1,955 lines after it.
func TestImportRunBrokenQuote(t *testing.T) {
	e := newImportEnv(t)
	w := e.startWorker(t, e.st, 0)
	t.Cleanup(w.Shutdown)
	id := e.upload(t, brokenCSV())
	e.checkBrokenFile(t, e.waitEnd(t, id))
	if _, err := e.jobs.Data(t.Context(), id); err == nil {
		t.Fatal("the upload is kept after the import ended")
	}
}

// A worker stopped in the middle, after a checkpoint, leaves the job
// running; another worker resumes it from the checkpoint: the same totals,
// no row stored twice, and only the rows after the checkpoint written
// again.
func TestImportRunResumesAfterRestart(t *testing.T) {
	e := newImportEnv(t)
	const batch = 100
	first := &gateStore{Redis: e.st, stopAt: 6, reached: make(chan struct{})}
	w1 := e.startWorker(t, first, batch)
	id := e.upload(t, brokenCSV())
	select {
	case <-first.reached:
	case <-time.After(poll.BusyMachine):
		t.Fatal("the import never reached its sixth batch")
	}
	w1.Shutdown() // the task's context ends: requeued, as after a kill
	mid, err := e.jobs.Status(t.Context(), id)
	if err != nil || mid.State != csvimport.StateRunning || mid.Added != first.rows.Load() || mid.Added < 4*batch {
		t.Fatalf("after the stop: %+v %v; %d rows stored", mid, err, first.rows.Load())
	}

	second := &gateStore{Redis: e.st, stopAt: -1}
	w2 := e.startWorker(t, second, batch)
	t.Cleanup(w2.Shutdown)
	e.checkBrokenFile(t, e.waitEnd(t, id))
	if got := second.rows.Load(); got != 2004-mid.Added {
		t.Fatalf("the second worker stored %d rows, want %d (only those after the checkpoint)", got, 2004-mid.Added)
	}
}

// failOnceStore is the real store, but its call number failAt fails
// (Redis answered an error; the task's context is alive) before it
// writes anything.
type failOnceStore struct {
	*store.Redis
	failAt int
	calls  atomic.Int32
}

func (f *failOnceStore) SubscribeMany(ctx context.Context, reqs []store.SubscribeRequest) ([]error, error) {
	if int(f.calls.Add(1)) == f.failAt {
		return nil, errors.New("LOADING Redis is loading the dataset in memory")
	}
	return f.Redis.SubscribeMany(ctx, reqs)
}

// A store error in the middle of the file is retried from the last
// checkpoint: the rows of the batch that failed are read and stored by
// the retry, not counted as read and left out (the error's note once
// saved the running count as the checkpoint, and the retry skipped the
// batch: 1,000 rows lost and the job failed for lines it could not
// account for).
func TestImportRunRetriesAFailedBatch(t *testing.T) {
	e := newImportEnv(t)
	const batch = 100
	runner := NewHandlers(Deps{Imports: e.jobs, ImportStore: &failOnceStore{Redis: e.st, failAt: 3}, Queue: e.client, Audit: e.trail, Log: discard}).Imports
	runner.Batch = batch
	w := New(e.rdb, Config{ShutdownTimeout: 200 * time.Millisecond, PollInterval: 50 * time.Millisecond, Log: discard,
		RetryDelay: func(int, error, *asynq.Task) time.Duration { return 0 },
		Lanes:      []Lane{{Name: tasks.LaneEmail, Concurrency: 2}}},
		Handlers{Imports: runner})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
	s := e.waitEnd(t, e.upload(t, brokenCSV()))
	e.checkBrokenFile(t, s)
	if s.Added != 2004 {
		t.Fatalf("%d added, %d present: the failed batch stored nothing, so all 2,004 are the import's", s.Added, s.Present)
	}
}

// A file whose reading does not account for its line count never ends as
// done: it fails, saying so.
func TestImportRunLineCountMismatchFails(t *testing.T) {
	e := newImportEnv(t)
	w := e.startWorker(t, e.st, 0)
	t.Cleanup(w.Shutdown)
	data := []byte("email\nann@example.com\n")
	id := csvimport.NewJobID()
	if err := e.jobs.Create(t.Context(), id, csvimport.Job{File: "list.csv", Lines: 5}, data); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Enqueue(tasks.NewImportRun(id)); err != nil {
		t.Fatal(err)
	}
	s := e.waitEnd(t, id)
	if s.State != csvimport.StateFailed || !strings.Contains(s.Error, "the file has 5 lines, 2 were read") {
		t.Fatalf("status %+v", s)
	}
}
