package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Result is the outcome of a load run.
type Result struct {
	Ops      int64
	Errors   int64
	Elapsed  time.Duration
	P50, P99 time.Duration
}

// Rate is operations per second.
func (r Result) Rate() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

func (r Result) String() string {
	s := fmt.Sprintf("%9.0f/s  (%d in %s", r.Rate(), r.Ops, r.Elapsed.Round(time.Millisecond))
	if r.P99 > 0 {
		s += fmt.Sprintf(", p50 %s, p99 %s", r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond))
	}
	if r.Errors > 0 {
		s += fmt.Sprintf(", %d errors", r.Errors)
	}
	return s + ")"
}

// Load runs op from workers goroutines for d, op receiving a unique
// sequence number, and records latencies.
func Load(workers int, d time.Duration, op func(n int64) error) Result {
	var seq, errs atomic.Int64
	lat := make([][]time.Duration, workers)
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if err := op(seq.Add(1)); err != nil {
					errs.Add(1)
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	all := slices.Concat(lat...)
	slices.Sort(all)
	r := Result{Ops: int64(len(all)), Errors: errs.Load(), Elapsed: time.Since(start)}
	if len(all) > 0 {
		r.P50, r.P99 = all[len(all)/2], all[len(all)*99/100]
	}
	return r
}

// Duration is how long a measured phase runs: BENCH_DURATION, or def.
func Duration(def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv("BENCH_DURATION")); err == nil {
		return d
	}
	return def
}

// RedisURL is the benchmark's Redis: NEWSLETTER_BENCH_REDIS_URL, or the
// local server on db 15. The tests' databases count up from 1
// (internal/testkit/redistest) and each test empties its own, so a
// benchmark on one of them loses its data to a test run beside it: db 7
// did, and a million-reader bench-issue waited for mails that were flushed
// away.
func RedisURL() string {
	if u := os.Getenv("NEWSLETTER_BENCH_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/15"
}

// Redis connects and empties the benchmark database.
func Redis(ctx context.Context, url string) (*redis.Client, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	opt.PoolSize = 128
	c := redis.NewClient(opt)
	if err := c.FlushDB(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redis at %s (start one, or set NEWSLETTER_BENCH_REDIS_URL): %w", url, err)
	}
	return c, nil
}

// BuildBinary builds cmd/newsletter into a temporary folder, or, with
// NEWSLETTER_BENCH_BIN set, uses that binary: how another build (the one
// before a change) is measured with the same harness.
func BuildBinary() (string, func(), error) {
	if bin := os.Getenv("NEWSLETTER_BENCH_BIN"); bin != "" {
		return bin, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "newsletter-bench")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "newsletter")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/newsletter")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		Warn("remove build folder", os.RemoveAll(dir))
		return "", nil, fmt.Errorf("build: %w", err)
	}
	return bin, func() { Warn("remove build folder", os.RemoveAll(dir)) }, nil
}

// FreeAddr is a free loopback address for a process to listen on.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// WaitHTTP polls url until it answers, for up to 20 seconds.
func WaitHTTP(url string) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			return resp.Body.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer", url)
}

// Warn prints a clean-up step's error: a benchmark still reports its
// figures, and the operator learns what was left behind.
func Warn(what string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s: %v\n", what, err)
	}
}

// Stop interrupts a process the benchmark started and waits for it.
func Stop(cmd *exec.Cmd) {
	Warn("interrupt "+cmd.Path, cmd.Process.Signal(os.Interrupt))
	if err := cmd.Wait(); err != nil {
		Warn("wait for "+cmd.Path, err)
	}
}
