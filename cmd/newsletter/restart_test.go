package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// redisServer is a redis-server of the test's own, persisting to an
// append-only file so it can be stopped and started again with its data.
type redisServer struct {
	bin, dir, port string
	cmd            *exec.Cmd
	// ephemeral: nothing on disk (a server that is never restarted).
	ephemeral bool
}

func startRedisServer(t *testing.T) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	return newRedisServer(t, bin, false)
}

func newRedisServer(t *testing.T, bin string, ephemeral bool) *redisServer {
	t.Helper()
	r := &redisServer{bin: bin, dir: t.TempDir(), port: strings.Split(freeAddr(t), ":")[1], ephemeral: ephemeral}
	r.start(t)
	t.Cleanup(func() {
		if r.cmd != nil {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait() // killed: its exit status says nothing
		}
	})
	return r
}

func (r *redisServer) url() string { return "redis://127.0.0.1:" + r.port + "/0" }

func (r *redisServer) start(t *testing.T) {
	t.Helper()
	args := []string{"--port", r.port, "--bind", "127.0.0.1", "--dir", r.dir, "--save", ""}
	if r.ephemeral {
		args = append(args, "--appendonly", "no")
	} else {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	r.cmd = exec.Command(r.bin, args...)
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + r.port})
	defer func() { _ = rdb.Close() }()
	// Up means loaded: a Redis reading its append-only file answers LOADING.
	poll.Until(t, poll.BusyMachine, func() error { return rdb.Ping(context.Background()).Err() })
}

// stop shuts Redis down as a restart does (SIGTERM: it finishes its
// append-only file and closes every connection).
func (r *redisServer) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Wait(); err != nil {
		t.Fatalf("redis-server did not shut down cleanly: %v", err)
	}
	r.cmd = nil
}

// longTestRedis gives one of the package's long tests (a minute or two,
// most of it waiting for asynq's recoverer) a redis-server of its own, so
// that the long tests run side by side (t.Parallel) rather than one after
// another. Without redis-server the test takes the package's database
// (the embedded miniredis, or db DBCommand of NEWSLETTER_TEST_REDIS_URL)
// and runs alone.
func longTestRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	return ownRedisServer(t, parallel)
}

// bulkTestRedis is longTestRedis for a bulk send (bulkTest).
func bulkTestRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	return ownRedisServer(t, bulkTest)
}

func ownRedisServer(t *testing.T, parallel func(*testing.T)) (*redis.Client, string) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return redistest.New(t, redistest.DBCommand)
	}
	parallel(t)
	srv := newRedisServer(t, bin, true)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + srv.port})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, srv.url()
}

// TestRedisRestartMidDigest restarts Redis (append-only file on, a few
// seconds down) while a worker process sends a digest at a real send rate
// through the shared limiter. The batches in flight wait for Redis at each
// step (pacing, claims, marks) and carry on when it is back, instead of
// handing themselves back to asynq while asynq cannot record it (which
// left them to its recoverer, a minute or two after their leases ran
// out). So every subscriber gets the digest once, every delivery is
// recorded, and each batch ran exactly once and succeeded: the worker's
// task counter and asynq's failure count say so, whatever the clock.
func TestRedisRestartMidDigest(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a redis-server in the middle of a digest")
	}
	const subscribers, batch, concurrency = 3000, 50, 4
	srv := startRedisServer(t)
	parallel(t) // a Redis of its own, as the other long tests (longTestRedis)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + srv.port})
	t.Cleanup(func() { _ = rdb.Close() })
	smtpSrv := smtptest.Start(t)
	smtpSrv.SetDelay(2 * time.Millisecond)
	st := versionedStore(t, rdb)
	ctx := context.Background()
	readers := seedDigest(t, st, "r", subscribers)

	env := realEnv(srv.url(), smtpSrv.URL(), map[string]string{
		"NEWSLETTER_CONCURRENCY": fmt.Sprint(concurrency), "NEWSLETTER_SEND_RATE": "500",
		"NEWSLETTER_CLAIM_TTL": "30m", "NEWSLETTER_DIGEST_BATCH": fmt.Sprint(batch),
	})
	addr := freeAddr(t)
	env["NEWSLETTER_ADDR"] = addr
	worker := startProcess(t, "worker", env)
	client := asynq.NewClientFromRedisClient(rdb)
	if _, err := tasks.EnqueueDigestPlan(ctx, client, "restart-1"); err != nil {
		t.Fatal(err)
	}
	poll.True(t, poll.BusyMachine, "the worker to send some mail", func() bool { return len(smtpSrv.Messages()) >= 500 })

	srv.stop(t)
	stoppedAt := len(smtpSrv.Messages())
	// The outage, about as long as a restart takes: every batch in flight
	// meets it (at 500 mails/s a batch asks Redis for send slots several
	// times a second).
	time.Sleep(5 * time.Second)
	srv.start(t)
	back := time.Now()

	poll.True(t, poll.BusyMachine, "every subscriber to get the digest", func() bool { return everyoneGotMail(smtpSrv, readers) })
	t.Logf("Redis stopped after %d mails, down 5 s; all %d sent %s after it was back (the rate alone needs %s)",
		stoppedAt, subscribers, time.Since(back).Round(100*time.Millisecond), time.Duration(subscribers-stoppedAt)*time.Second/500)
	if dups := len(smtpSrv.Messages()) - subscribers; dups != 0 {
		t.Fatalf("%d duplicates", dups)
	}
	if worker.ProcessState != nil {
		t.Fatalf("the worker exited during the outage: %v", worker.ProcessState)
	}
	poll.Until(t, poll.BusyMachine, func() error {
		run, err := st.DigestRun(ctx, "restart-1")
		if err != nil {
			return err
		}
		if run.Sent != subscribers || run.State != store.RunPlanned || run.Planned != subscribers {
			return fmt.Errorf("run %+v", run)
		}
		return nil
	})
	// Each batch ran once, and succeeded: none was handed back (deferred,
	// retried) or run again after its lease expired.
	// The digest goes out as an issue: its plan makes the issue, whose
	// planner and batches send it.
	want := map[string]float64{
		"digest:plan/success": 1,
		"issue:plan/success":  1,
		"email:issue/success": subscribers / batch,
	}
	poll.Until(t, poll.BusyMachine, func() error {
		got, err := taskRuns("http://"+addr, tasks.TypeDigestPlan, tasks.TypeIssuePlan, tasks.TypeIssueEmail)
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("task runs by result %v, want %v", got, want)
		}
		return nil
	})
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(tasks.QueueCritical)
	if err != nil {
		t.Fatal(err)
	}
	if info.Failed != 0 || info.Retry != 0 || info.Archived != 0 {
		t.Fatalf("critical queue: %d failed, %d to retry, %d archived", info.Failed, info.Retry, info.Archived)
	}
}

// taskRuns reads newsletter_tasks_total from a process's /metrics: the
// runs of the given task types by "type/result".
func taskRuns(base string, types ...string) (map[string]float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		m := taskLine.FindStringSubmatch(line)
		if m == nil || !slices.Contains(types, m[3]) {
			continue
		}
		v, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", line, err)
		}
		if v != 0 {
			out[m[3]+"/"+m[2]] = v
		}
	}
	return out, nil
}

var taskLine = regexp.MustCompile(`^newsletter_tasks_total\{lane="[^"]*",queue="([^"]*)",result="([^"]*)",type="([^"]*)"\} (\S+)$`)
