package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/poll"
)

// TestHungRedisAnswersInTime freezes Redis with SIGSTOP (it keeps its
// connections open and answers nothing, unlike a dead one): /readyz says
// 503 within its budget, a signup says 503 within the request timeout and
// that trying again is safe; when Redis wakes up, both work again.
func TestHungRedisAnswersInTime(t *testing.T) {
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
	poll.Until(t, 10*time.Second, func() error { return rdb.Ping(context.Background()).Err() })

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
	poll.Until(t, 15*time.Second, func() error {
		if code, _ := do("GET", "/readyz", ""); code != http.StatusOK {
			return &statusError{code}
		}
		return nil
	})
	if code, body := do("POST", "/subscribe", `{"email":"hung@example.com"}`); code != http.StatusAccepted {
		t.Fatalf("signing up again once Redis is back: %d %s", code, body)
	}
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "status " + strconv.Itoa(e.code) }
