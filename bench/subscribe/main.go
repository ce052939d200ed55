// Command subscribe is `make bench-subscribe`: the rate of POST /subscribe
// (new address per request, double opt-in on, the API role alone in its own
// process) next to the rate at which a plain asynq client enqueues into the
// same Redis in the same run.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-subscribe:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	dur := bench.Duration(10 * time.Second)
	workers := 64
	url := bench.RedisURL()
	rdb, err := bench.Redis(ctx, url)
	if err != nil {
		return err
	}
	defer func() { bench.Warn("close redis", rdb.Close()) }()

	var r results
	cpu := redisCPUMeter(ctx, rdb)
	if err := cpu(&r.rawRedis, func() error { r.raw, err = rawEnqueue(ctx, rdb, workers, dur); return err }); err != nil {
		return err
	}
	base, stop, err := startAPI(url)
	if err != nil {
		return err
	}
	defer stop()
	l := newLoader(workers)
	if err := cpu(&r.subRedis, func() error { r.sub, err = l.subscribe(base, dur); return err }); err != nil {
		return err
	}
	if r.health, err = l.healthz(base, dur/2); err != nil {
		return err
	}
	// Count the real endpoint's confirmations before the ceiling's tasks
	// join them in the same queue. Unreadable, the count is only left out
	// of the report.
	r.queued, _ = asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo("transactional")
	thin, err := startEnqueueOnly(url)
	if err != nil {
		return err
	}
	r.ceiling, err = l.subscribe(thin.URL, dur)
	thin.Close()
	if err != nil {
		return err
	}
	r.print(url, workers, dur, l.tool())
	return nil
}

// results are the run's measurements, in the order they are taken.
type results struct {
	raw, sub, health, ceiling bench.Result
	queued                    *asynq.QueueInfo // the real endpoint's confirmations; nil: unknown
	rawRedis, subRedis        time.Duration    // Redis CPU during the raw enqueue and the signups
}

// redisCPUMeter answers a function that runs step and adds the Redis
// server's CPU time over it to *into.
func redisCPUMeter(ctx context.Context, rdb *redis.Client) func(into *time.Duration, step func() error) error {
	return func(into *time.Duration, step func() error) error {
		before, err := bench.RedisCPU(ctx, rdb)
		if err != nil {
			return fmt.Errorf("redis CPU: %w", err)
		}
		if err := step(); err != nil {
			return err
		}
		after, err := bench.RedisCPU(ctx, rdb)
		if err != nil {
			return fmt.Errorf("redis CPU: %w", err)
		}
		*into += after - before
		return nil
	}
}

// perOp is cpu over ops, in µs.
func perOp(cpu time.Duration, ops int64) float64 {
	return float64(cpu.Microseconds()) / float64(max(ops, 1))
}

// rawEnqueue measures a plain asynq client enqueueing confirmations into
// the same Redis, the figure the endpoint is held against, then empties
// the database so the endpoint starts from the same state.
func rawEnqueue(ctx context.Context, rdb *redis.Client, workers int, dur time.Duration) (bench.Result, error) {
	client := asynq.NewClientFromRedisClient(rdb)
	payload := []byte(`{"email":"someone@example.com","nonce":"0123456789abcdef"}`)
	raw := bench.Load(workers, dur, func(n int64) error {
		id := "confirm:bench" + strconv.FormatInt(n, 10) + "@example.com"
		_, err := client.EnqueueContext(ctx, asynq.NewTask("email:confirm", payload), asynq.Queue("transactional"), asynq.TaskID(id))
		return err
	})
	return raw, rdb.FlushDB(ctx).Err()
}

// startAPI builds the binary and starts `newsletter api` on a free port
// against url, with double opt-in on and no rate limit, waiting until it
// answers. stop ends the process, then removes the binary.
func startAPI(url string) (base string, stop func(), err error) {
	bin, cleanup, err := bench.BuildBinary()
	if err != nil {
		return "", nil, err
	}
	addr, err := bench.FreeAddr()
	if err != nil {
		cleanup()
		return "", nil, err
	}
	api := exec.Command(bin, "api")
	api.Env = append(os.Environ(),
		"NEWSLETTER_ADDR="+addr, "NEWSLETTER_REDIS_URL="+url, "NEWSLETTER_SECRET=benchmark-secret-0123456789",
		"NEWSLETTER_SUBSCRIBE_RATE=0", "NEWSLETTER_DOUBLE_OPTIN=true")
	var apiErr bytes.Buffer
	api.Stderr = &apiErr
	if err := api.Start(); err != nil {
		cleanup()
		return "", nil, err
	}
	stop = func() {
		bench.Stop(api)
		cleanup()
	}
	base = "http://" + addr
	if err := bench.WaitHTTP(base + "/healthz"); err != nil {
		stop()
		return "", nil, fmt.Errorf("%w\n%s", err, apiErr.String())
	}
	return base, stop, nil
}

// loader generates the HTTP load: with wrk if installed, which costs the
// machine less, else with the Go load generator.
type loader struct {
	hc      *http.Client
	workers int
	haveWrk bool
}

func newLoader(workers int) *loader {
	return &loader{
		hc:      &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}},
		workers: workers,
		haveWrk: bench.HaveWrk(),
	}
}

func (l *loader) tool() string {
	if l.haveWrk {
		return "wrk"
	}
	return "Go load generator (install wrk for a leaner one)"
}

// subscribe posts a new address per request to base's /subscribe for d.
func (l *loader) subscribe(base string, d time.Duration) (bench.Result, error) {
	if l.haveWrk {
		return bench.Wrk(base+"/subscribe", wrkSubscribe, l.workers, d)
	}
	runID := time.Now().UnixNano()
	return bench.Load(l.workers, d, func(n int64) error {
		body := fmt.Sprintf(`{"email":"b%d-%d@example.com"}`, runID, n)
		return expect(l.hc.Post(base+"/subscribe", "application/json", bytes.NewBufferString(body)))(http.StatusAccepted)
	}), nil
}

// healthz loads base's /healthz (no I/O) for d: the ceiling of HTTP and
// the load generator.
func (l *loader) healthz(base string, d time.Duration) (bench.Result, error) {
	if l.haveWrk {
		return bench.Wrk(base+"/healthz", "", l.workers, d)
	}
	return bench.Load(l.workers, d, func(int64) error { return expect(l.hc.Get(base + "/healthz"))(http.StatusOK) }), nil
}

// print reports the rates side by side and the endpoint against its
// targets, relative to raw enqueue and to the enqueue-only ceiling.
func (r results) print(url string, workers int, dur time.Duration, tool string) {
	raw, sub, health, ceiling, queued := r.raw, r.sub, r.health, r.ceiling, r.queued
	ratio := sub.Rate() / raw.Rate()
	fmt.Printf("redis %s, %d concurrent clients, %s each, HTTP load from %s\n", url, workers, dur, tool)
	fmt.Printf("raw asynq enqueue      %s\n", raw)
	fmt.Printf("POST /subscribe (API)  %s\n", sub)
	fmt.Printf("GET /healthz (no I/O)  %s  <- HTTP and load-generator ceiling\n", health)
	fmt.Printf("HTTP + enqueue only    %s  <- an endpoint that only enqueues (no validation, no store write)\n", ceiling)
	if queued != nil {
		// wrk does not count requests still in flight when it stops, so
		// the queue may hold a few more than it reports.
		fmt.Printf("confirmations queued   %d (at least one per accepted request: %v)\n", queued.Size, int64(queued.Size) >= sub.Ops)
	}
	fmt.Printf("ratio                  %.2f of raw enqueue (target >= 0.50), p99 %s (target < 50ms)\n", ratio, sub.P99.Round(time.Millisecond/10))
	fmt.Printf("redis CPU per signup   %.1f µs (target < 20 µs); per raw enqueue %.1f µs\n", perOp(r.subRedis, sub.Ops), perOp(r.rawRedis, raw.Ops))
	fmt.Printf("enqueue-only ratio     %.2f of raw enqueue: what an endpoint doing nothing but one enqueue reaches here;\n", ceiling.Rate()/raw.Rate())
	fmt.Printf("                       the signup does %.2f of that\n", sub.Rate()/ceiling.Rate())
}

// wrkSubscribe posts a new address per request; each wrk thread gets its own
// prefix so no two requests share an address.
const wrkSubscribe = `
local n, threads = 0, 0
setup = function(thread) threads = threads + 1; thread:set("prefix", "t" .. threads .. "x" .. os.time()) end
request = function()
  n = n + 1
  return wrk.format("POST", nil, {["Content-Type"]="application/json"}, '{"email":"' .. prefix .. '-' .. n .. '@example.com"}')
end
`

// expect turns an HTTP round trip into an error unless it answered code.
func expect(resp *http.Response, err error) func(code int) error {
	return func(code int) error {
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body) // drained so the connection is reused
		if err := resp.Body.Close(); err != nil {
			return err
		}
		if resp.StatusCode != code {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}
