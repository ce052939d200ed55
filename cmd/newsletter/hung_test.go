package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/queuemetrics"
	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// TestHungRedisAnswersInTime freezes Redis with SIGSTOP (it keeps its
// connections open and answers nothing, unlike a dead one): /readyz says
// 503 within its budget, a signup says 503 within the request timeout and
// that trying again is safe; when Redis wakes up, both work again.
func TestHungRedisAnswersInTime(t *testing.T) {
	srv, port := freezableRedis(t)
	svc := startService(t, realEnv("redis://127.0.0.1:"+port+"/0", "smtp://127.0.0.1:1?tls=none", map[string]string{
		"NEWSLETTER_REQUEST_TIMEOUT": "1s",
	}), "api")
	// Generous against this machine's speed; a hung call would take the
	// Redis client's retries of its 3 s read timeout, and more.
	client := &http.Client{Timeout: 8 * time.Second}
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, svc.base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s under a hung Redis: %v", method, path, err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := do("GET", "/readyz", ""); code != http.StatusOK {
		t.Fatalf("readyz before: %d", code)
	}

	if err := srv.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if code, body := do("GET", "/readyz", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz under a hung Redis: %d %s", code, body)
	}
	t.Logf("readyz answered 503 in %s", time.Since(start).Round(time.Millisecond))
	code, body := do("POST", "/subscribe", `{"email":"hung@example.com"}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "again is safe") {
		t.Fatalf("signup under a hung Redis: %d %s", code, body)
	}

	if err := srv.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, poll.BusyMachine, func() error {
		if code, _ := do("GET", "/readyz", ""); code != http.StatusOK {
			return &statusError{code}
		}
		return nil
	})
	if code, body := do("POST", "/subscribe", `{"email":"hung@example.com"}`); code != http.StatusAccepted {
		t.Fatalf("signing up again once Redis is back: %d %s", code, body)
	}
}

// freezableRedis starts a redis-server of the test's own, which the test
// may freeze with SIGSTOP (it keeps its connections open and answers
// nothing, unlike a dead one), and returns it with its port; it skips the
// test where redis-server is not installed.
func freezableRedis(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	port := strings.Split(freeAddr(t), ":")[1]
	srv := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the service has stopped (cleanups run last first)
		_ = srv.Process.Signal(syscall.SIGCONT)
		_ = srv.Process.Kill()
		_ = srv.Wait() // killed: its exit status says nothing
	})
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	t.Cleanup(func() { _ = rdb.Close() })
	poll.Until(t, poll.BusyMachine, func() error { return rdb.Ping(context.Background()).Err() })
	return srv, port
}

// TestHungRedisScrapeAnswersInTime: with Redis frozen, /metrics answers
// within its own wait (a client timeout far below the Redis client's 15 s
// of retries bounds it here), first with the figures read before, then, once
// they are older than the cache's time, still with those figures and their
// age; when Redis wakes up the figures are fresh again.
func TestHungRedisScrapeAnswersInTime(t *testing.T) {
	srv, port := freezableRedis(t)
	svc := startService(t, realEnv("redis://127.0.0.1:"+port+"/0", "smtp://127.0.0.1:1?tls=none", nil), "api")
	// Generous against this machine's speed: a scrape waits 2 s for
	// Redis, a hung one used to take 15 s.
	client := &http.Client{Timeout: 8 * time.Second}
	scrape := func() (string, float64) {
		resp, err := client.Get(svc.base + "/metrics")
		if err != nil {
			t.Fatalf("a scrape under a hung Redis: %v", err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		age := -1.0
		if m := regexp.MustCompile(`(?m)^newsletter_queue_metrics_age_seconds (\S+)$`).FindStringSubmatch(string(b)); m != nil {
			age, _ = strconv.ParseFloat(m[1], 64)
		}
		return string(b), age
	}
	const figure = `newsletter_queue_tasks{queue="default",state="pending"} 0`
	poll.True(t, poll.BusyMachine, "the queue figures", func() bool {
		body, _ := scrape()
		return strings.Contains(body, figure)
	})

	if err := srv.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Every scrape answers (or the client's timeout fails the test);
	// once the figures are older than the cache's 5 s, each one waits for
	// the hung reading and then shows them anyway, with their age.
	poll.True(t, poll.BusyMachine, "a scrape with figures older than the cache's time", func() bool {
		body, age := scrape()
		if !strings.Contains(body, figure) || !strings.Contains(body, "go_goroutines") {
			t.Fatalf("a scrape under a hung Redis lacks the last figures:\n%s", body)
		}
		return age >= queuemetrics.CacheTTL.Seconds()
	})

	if err := srv.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	poll.True(t, poll.BusyMachine, "fresh figures once Redis is back", func() bool {
		body, age := scrape()
		return strings.Contains(body, figure) && age >= 0 && age < queuemetrics.CacheTTL.Seconds()
	})
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + strconv.Itoa(e.code) }
