package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// commandCounter is a go-redis hook that counts the commands sent,
// pipelined ones included.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestScrapesShareOneReading: the figures read from Redis cost one reading
// (about a hundred commands) however many scrapes arrive while they are
// fresh; the clock stands still, so every scrape here is within the cache's
// time.
func TestScrapesShareOneReading(t *testing.T) {
	rdb, _ := redistest.Own(t, redistest.DBCommand)
	// Some queues in use, so the inspector has something to walk.
	client := asynq.NewClientFromRedisClient(rdb)
	for _, q := range tasks.Queues {
		if _, err := client.Enqueue(asynq.NewTask("test:noop", nil), asynq.Queue(q), asynq.ProcessIn(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	counter := &commandCounter{}
	rdb.AddHook(counter)
	frozen := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	reg.MustRegister(redisFigures(asynq.NewInspectorFromRedisClient(rdb), store.NewRedis(rdb), func() time.Time { return frozen }))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	scrape := func() string {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Error(err)
			return ""
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// The first reading may outlast a scrape's wait on a busy machine:
	// scrape until its figures show.
	poll.True(t, poll.BusyMachine, "the first figures", func() bool {
		return strings.Contains(scrape(), `newsletter_queue_tasks{queue="default",state="scheduled"} 1`)
	})
	reading := counter.n.Load()
	if reading == 0 {
		t.Fatal("the figures cost no Redis command: the counter does not see them")
	}
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if body := scrape(); !strings.Contains(body, "asynq_queue_size") {
				t.Errorf("a scrape without the queue figures:\n%.300s", body)
			}
		})
	}
	wg.Wait()
	if n := counter.n.Load(); n != reading {
		t.Fatalf("100 more scrapes cost %d Redis commands; one reading costs %d and the figures were fresh", n-reading, reading)
	}
	t.Logf("one reading: %d Redis commands; 101 scrapes: %d", reading, counter.n.Load())
}

// TestMetricsListener: with NEWSLETTER_METRICS_ADDR, /metrics is served
// there, by the API role and by the other roles alike, and no longer on
// the main (public) listener.
func TestMetricsListener(t *testing.T) {
	_, redisURL := redistest.Own(t, redistest.DBCommand)
	for _, role := range []string{"api", "scheduler"} {
		t.Run(role, func(t *testing.T) {
			metricsAddr := freeAddr(t)
			svc := startService(t, realEnv(redisURL, "smtp://127.0.0.1:1?tls=none", map[string]string{
				"NEWSLETTER_METRICS_ADDR": metricsAddr,
			}), role)
			resp, err := http.Get("http://" + metricsAddr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines") {
				t.Fatalf("/metrics on NEWSLETTER_METRICS_ADDR: %s\n%.300s", resp.Status, body)
			}
			if role == "api" && !strings.Contains(string(body), "newsletter_queue_tasks") {
				t.Fatalf("the API role's metrics listener lacks the queue figures:\n%s", body)
			}
			resp, err = http.Get(svc.base + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("/metrics on the main listener: %s, want 404", resp.Status)
			}
			// Nothing else is served on the metrics listener.
			resp, err = http.Get("http://" + metricsAddr + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("/healthz on the metrics listener: %s, want 404", resp.Status)
			}
			poll.True(t, poll.BusyMachine, "the banner's metrics line", func() bool {
				return strings.Contains(svc.stdout.String(), "metrics          "+localURL(metricsAddr)+"/metrics")
			})
		})
	}
}
