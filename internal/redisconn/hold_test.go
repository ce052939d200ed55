package redisconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/logtest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// ownRedis is a redis-server of the test's own, which it stops and starts:
// never the shared one (a stop would take it from every other test).
type ownRedis struct {
	bin, port string
	cmd       *exec.Cmd
}

// startOwnRedis starts a redis-server on a free port from 6411 up.
func startOwnRedis(t *testing.T) *ownRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	r := &ownRedis{bin: bin, port: freePort(t)}
	r.start(t)
	t.Cleanup(func() {
		if r.cmd != nil {
			r.stop(t)
		}
	})
	return r
}

// freePort is the first port from 6411 nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	for p := 6411; p < 6500; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return strconv.Itoa(p)
	}
	t.Fatal("no free port from 6411 to 6499")
	return ""
}

func (r *ownRedis) addr() string { return "127.0.0.1:" + r.port }

func (r *ownRedis) start(t *testing.T) {
	t.Helper()
	r.cmd = exec.Command(r.bin, "--port", r.port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	probe := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
	defer func() { _ = probe.Close() }()
	poll.Until(t, poll.BusyMachine, func() error { return probe.Ping(context.Background()).Err() })
}

// stop shuts Redis down as a restart does (SIGTERM).
func (r *ownRedis) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Wait(); err != nil {
		t.Fatalf("redis-server did not shut down cleanly: %v", err)
	}
	r.cmd = nil
}

// client is the service's client on r (Client), with the hold it is
// given, for the test to see the commands it holds.
func (r *ownRedis) client(t *testing.T) (redis.UniversalClient, *holdHook) {
	t.Helper()
	c, err := newClient(asynq.RedisClientOpt{Addr: r.addr()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	h := &holdHook{}
	c.AddHook(h)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c, h
}

// heldCount is how many held commands newsletter_redis_held_seconds saw
// with result.
func heldCount(t *testing.T, result string) uint64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	RegisterMetrics(reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	t.Fatalf("no newsletter_redis_held_seconds{result=%q}", result)
	return 0
}

// TestHeldUntilRedisIsBack: a command and a pipeline sent under WaitOut
// while Redis is stopped wait for it, and go through once it is started
// again; the log says it went away and came back once, not per command.
func TestHeldUntilRedisIsBack(t *testing.T) {
	r := startOwnRedis(t)
	c, hold := r.client(t)
	var log logtest.Buffer
	ctx := WaitOut(context.Background(), Wait{For: time.Minute, Log: slog.New(slog.NewTextHandler(&log, nil))})
	through := heldCount(t, heldThrough)
	r.stop(t)
	done := make(chan error, 2)
	go func() { done <- c.Set(ctx, "k", "v", 0).Err() }()
	go func() {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, "n")
			p.Expire(ctx, "n", time.Hour)
			return nil
		})
		done <- err
	}()
	poll.True(t, poll.BusyMachine, "both held", func() bool { return hold.holding.Load() == 2 })
	select {
	case err := <-done:
		t.Fatalf("a command returned while Redis was down: %v", err)
	default:
	}
	r.start(t)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("after Redis came back: %v", err)
		}
	}
	plain := context.Background()
	if v, err := c.Get(plain, "k").Result(); err != nil || v != "v" {
		t.Fatalf("the held SET: %q %v", v, err)
	}
	if n, err := c.Get(plain, "n").Int(); err != nil || n != 1 {
		t.Fatalf("the held pipeline's INCR: %d %v, want it run once", n, err)
	}
	if got := heldCount(t, heldThrough) - through; got != 2 {
		t.Errorf("%d commands counted as held and through, want 2", got)
	}
	out := log.String()
	if strings.Count(out, "Redis away") != 1 || strings.Count(out, "Redis is back") != 1 {
		t.Errorf("want one line each for away and back:\n%s", out)
	}
}

// TestWaitIsBounded: a command without WaitOut is not held (the API
// answers 503); one under it gives up at its bound, or when its context ends.
func TestWaitIsBounded(t *testing.T) {
	r := startOwnRedis(t)
	c, _ := r.client(t)
	r.stop(t)
	if err := c.Ping(context.Background()).Err(); !notReached(err) {
		t.Fatalf("without WaitOut: %v, want the refused dial", err)
	}
	gaveUp := heldCount(t, heldGaveUp)
	quiet := Wait{For: 200 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := c.Ping(WaitOut(context.Background(), quiet)).Err(); !notReached(err) {
		t.Fatalf("past the bound: %v, want the refused dial", err)
	}
	if got := heldCount(t, heldGaveUp) - gaveUp; got != 1 {
		t.Fatalf("%d commands counted as given up, want 1", got)
	}
	// A task whose time is up: its held command does not wait an hour.
	ctx, cancel := context.WithCancel(WaitOut(context.Background(), Wait{For: time.Hour, Log: quiet.Log}))
	defer cancel()
	fresh, hold := r.client(t)
	done := make(chan error, 1)
	go func() { done <- fresh.Ping(ctx).Err() }()
	poll.True(t, poll.BusyMachine, "the command held", func() bool { return hold.holding.Load() == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a command went through with Redis down")
	}
}

// TestNotReached: only what says the command did not run is sent again.
func TestNotReached(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	read := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{dial, true},
		{fmt.Errorf("wrapped: %w", dial), true},
		{redis.ErrPoolTimeout, true},
		{proto("LOADING Redis is loading the dataset in memory"), true},
		{proto("READONLY You can't write against a read only replica."), true},
		{proto("CLUSTERDOWN The cluster is down"), true},
		{proto("MASTERDOWN Link with MASTER is down"), true},
		{proto("BUSY Redis is busy running a script"), true},
		{proto("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		// Sent, and the answer lost: it may have run.
		{io.EOF, false},
		{read, false},
		{context.DeadlineExceeded, false},
		// Ours, closed for good; and a refusal that waiting does not cure.
		{redis.ErrClosed, false},
		{proto("ERR unknown command"), false},
		{errors.New("LOADING as plain text"), false},
	} {
		if got := notReached(c.err); got != c.want {
			t.Errorf("notReached(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// proto is an error reply of Redis.
type proto string

func (p proto) Error() string { return string(p) }
func (proto) RedisError()     {}
