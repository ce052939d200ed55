package issues_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/pace"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

// The issues service plans; the worker sends. The model test needs both,
// over the paths production uses (a real store, asynq, SMTP), so this
// harness is a small version of the worker package's own (delivery_test.go
// there): what an issue's send uses, set as the worker's tests set it.

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// delivery is a store on Redis (redistest: a server or miniredis), a
// scripted SMTP server, and what a worker started on them reads.
type delivery struct {
	rdb    *redis.Client
	store  *store.Redis
	smtp   *smtptest.Server
	client *asynq.Client
	insp   *asynq.Inspector

	// now and zone are the worker's clock and the zone of readers
	// without one; set them before startWorker.
	now  func() time.Time
	zone *time.Location
}

func newDelivery(t *testing.T) *delivery {
	t.Helper()
	rdb, _ := redistest.New(t, redistest.DBIssues)
	return &delivery{rdb: rdb, store: store.NewRedis(rdb), smtp: smtptest.Start(t),
		client: asynq.NewClientFromRedisClient(rdb), insp: asynq.NewInspectorFromRedisClient(rdb)}
}

// startWorker starts one worker process's worth (its own SMTP pool and
// limiter instance on the shared Redis) and returns its stop, which the
// test may call to restart it as a killed worker would be; the test's
// end calls it too, once.
func (d *delivery) startWorker(t *testing.T, sendRate, concurrency int) (stop func()) {
	t.Helper()
	server, err := email.ParseServerURL(d.smtp.URL())
	if err != nil {
		t.Fatal(err)
	}
	m, err := worker.NewSMTPMailer(mailer.ComposeOptions{From: "News <news@example.com>"}, email.SMTPOptions{Server: server, PoolSize: concurrency, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	links := worker.Links{BaseURL: "https://news.example.com", Signer: token.NewSigner([]byte("0123456789abcdef"), 0), ListID: "News <newsletter.example.com>"}
	// The short throttle, retries and poll interval keep a busy
	// machine's run short; nothing here waits for them to pass.
	h := worker.NewHandlers(worker.Deps{
		Store: d.store, Mailer: m, Render: render, Links: links, Log: discard,
		Queue: d.client, Depth: worker.RedisQueueDepth{Redis: d.rdb}, Pace: pace.New(d.rdb, sendRate),
		Throttle: 50 * time.Millisecond, DigestBatch: 50, MarkWindow: concurrency,
		Now: d.now, DefaultZone: d.zone,
	})
	w := worker.New(d.rdb, worker.Config{
		Concurrency: concurrency, ShutdownTimeout: 5 * time.Second, Log: discard, PollInterval: 20 * time.Millisecond,
		Retry:      worker.RetryPolicy{Base: 20 * time.Millisecond, Throttled: 200 * time.Millisecond, Max: time.Second},
		GroupGrace: time.Second, GroupMaxDelay: 10 * time.Second, GroupMaxSize: 100,
	}, h)
	if err := w.Start(); err != nil {
		t.Fatalf("start the worker: %v", err)
	}
	// Shut down before closing the pool its handlers send through.
	stop = sync.OnceFunc(func() {
		w.Shutdown()
		if err := m.Close(); err != nil {
			t.Logf("close the SMTP pool: %v", err)
		}
	})
	t.Cleanup(stop)
	return stop
}

// waitIssueSent waits until the issue id is sent and returns its
// progress.
func (d *delivery) waitIssueSent(t *testing.T, id int64) store.IssueProgress {
	t.Helper()
	var p store.IssueProgress
	poll.Until(t, poll.BusyMachine, func() error {
		var err error
		if p, err = d.store.IssueProgress(context.Background(), id); err == nil && p.Status == store.IssueSent {
			return nil
		}
		return fmt.Errorf("issue %d: %+v (%v); smtp got %d", id, p, err, len(d.smtp.Messages()))
	})
	return p
}

// issueWork names the issue tasks in the critical queue that are pending,
// running or waiting for a retry ("" when none): the scheduled ones wait
// for the test's clock, which the test moves itself.
func issueWork(insp *asynq.Inspector) string {
	var left []string
	for _, state := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){insp.ListPendingTasks, insp.ListActiveTasks, insp.ListRetryTasks} {
		infos, err := state(tasks.QueueCritical)
		switch {
		case errors.Is(err, asynq.ErrQueueNotFound):
			// Nothing was ever queued there.
		case err != nil:
			return err.Error()
		}
		for _, ti := range infos {
			if ti.Type == tasks.TypeIssuePlan || ti.Type == tasks.TypeIssueEmail {
				left = append(left, ti.ID+" ("+ti.State.String()+", "+strconv.Quote(ti.LastErr)+")")
			}
		}
	}
	return strings.Join(left, ", ")
}

// seedReaders makes n active readers of the updates topic in zone ("":
// the default zone), prefix0000@example.org on, and returns their
// addresses.
func seedReaders(t *testing.T, s *store.Redis, prefix string, n int, zone string) []string {
	t.Helper()
	reqs := make([]store.SubscribeRequest, n)
	emails := make([]string, n)
	for i := range reqs {
		emails[i] = fmt.Sprintf("%s%04d@example.org", prefix, i)
		reqs[i] = store.SubscribeRequest{Email: emails[i], Activate: true, OnlyNew: true, Timezone: zone, Topics: []string{topics.Updates}}
	}
	errs, err := s.SubscribeMany(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return emails
}

// testClock is the time the test sets: the worker's and the service's
// Now, so a schedule comes due when the test says.
type testClock struct {
	sync.Mutex
	at time.Time
}

func (c *testClock) Now() time.Time   { c.Lock(); defer c.Unlock(); return c.at }
func (c *testClock) Set(at time.Time) { c.Lock(); defer c.Unlock(); c.at = at }
func (c *testClock) String() string   { return c.Now().Format(time.RFC3339) }

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("time zone %s: %v", name, err)
	}
	return loc
}
