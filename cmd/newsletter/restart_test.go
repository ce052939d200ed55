package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/poll"
	"github.com/newsletter/newsletter/internal/smtptest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// redisServer is a redis-server of the test's own, persisting to an
// append-only file so it can be stopped and started again with its data.
type redisServer struct {
	bin, dir, port string
	cmd            *exec.Cmd
}

func startRedisServer(t *testing.T) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	r := &redisServer{bin: bin, dir: t.TempDir(), port: strings.Split(freeAddr(t), ":")[1]}
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
	r.cmd = exec.Command(r.bin, "--port", r.port, "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always")
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + r.port})
	defer func() { _ = rdb.Close() }()
	// Up means loaded: a Redis reading its append-only file answers LOADING.
	poll.Until(t, 20*time.Second, func() error { return rdb.Ping(context.Background()).Err() })
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

// TestRedisRestartMidDigest restarts Redis while a worker process sends a
// digest. Batches caught by the outage fail, and their retries take over
// the claims their own dead attempts held (the claim names its task): the
// claim TTL here is far longer than the test's deadline, so a retry that
// waited for a claim to expire would fail it. Every subscriber gets the
// digest, duplicates at most the worker's concurrency, and every delivery
// is recorded (marks written while Redis was away are not lost).
func TestRedisRestartMidDigest(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a redis-server in the middle of a digest")
	}
	const subscribers, concurrency = 3000, 4
	srv := startRedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + srv.port})
	t.Cleanup(func() { _ = rdb.Close() })
	smtpSrv := smtptest.Start(t)
	smtpSrv.SetDelay(2 * time.Millisecond)
	st := store.NewRedis(rdb)
	ctx := context.Background()
	readers := seedDigest(t, st, "r", subscribers)

	env := realEnv(srv.url(), smtpSrv.URL(), map[string]string{
		"NEWSLETTER_CONCURRENCY": fmt.Sprint(concurrency), "NEWSLETTER_SEND_RATE": "100000",
		"NEWSLETTER_CLAIM_TTL": "30m", "NEWSLETTER_DIGEST_BATCH": "50",
	})
	env["NEWSLETTER_ADDR"] = freeAddr(t)
	worker := startProcess(t, "worker", env)
	client := asynq.NewClientFromRedisClient(rdb)
	if _, err := tasks.EnqueueDigestPlan(ctx, client, "restart-1"); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 60*time.Second, "the worker to send some mail", func() bool { return len(smtpSrv.Messages()) >= 500 })

	srv.stop(t)
	stoppedAt := len(smtpSrv.Messages())
	// The outage: long enough for every in-flight batch to hit it (a batch
	// of 50 takes well under this), about as long as a restart takes.
	time.Sleep(6 * time.Second)
	srv.start(t)
	back := time.Now()

	poll.True(t, 150*time.Second, "every subscriber to get the digest", func() bool { return everyoneGotMail(smtpSrv, readers) })
	dups := len(smtpSrv.Messages()) - subscribers
	t.Logf("Redis stopped after %d mails, down 6 s; all %d sent %s after it was back; %d duplicates",
		stoppedAt, subscribers, time.Since(back).Round(100*time.Millisecond), dups)
	if dups > concurrency {
		t.Fatalf("%d duplicates, more than the worker's concurrency %d", dups, concurrency)
	}
	if worker.ProcessState != nil {
		t.Fatalf("the worker exited during the outage: %v", worker.ProcessState)
	}
	poll.Until(t, 30*time.Second, func() error {
		run, err := st.DigestRun(ctx, "restart-1")
		if err != nil {
			return err
		}
		if run.Sent != subscribers || run.State != store.RunPlanned {
			return fmt.Errorf("run %+v", run)
		}
		return nil
	})
}
