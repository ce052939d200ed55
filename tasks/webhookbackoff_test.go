package tasks_test

import (
	"testing"
	"time"

	"github.com/newsletter/newsletter/tasks"
)

func TestBackoff(t *testing.T) {
	b := tasks.WebhookBackoff{Base: time.Second, Max: time.Minute, Window: time.Hour}
	for n := range 12 {
		window := min(time.Second<<n, time.Minute) // n < 12: no overflow
		for range 50 {
			if d := b.Delay(n, 0); d < window/2 || d > window {
				t.Fatalf("retry %d: delay %s outside [%s, %s]", n, d, window/2, window)
			}
		}
	}
	if d := b.Delay(0, 30*time.Second); d != 30*time.Second {
		t.Fatalf("Retry-After 30s: delay %s", d)
	}
	if d := b.Delay(0, 5*time.Hour); d != time.Minute {
		t.Fatalf("Retry-After beyond Max: delay %s, want Max", d)
	}
	// Even the shortest draws of the jitter span the window before
	// asynq's ceiling is reached.
	for _, bo := range []tasks.WebhookBackoff{b, tasks.DefaultWebhookBackoff} {
		var least time.Duration
		d := bo.Base
		for range bo.MaxRetry() - 1 {
			least += min(d, bo.Max) / 2
			d = min(2*d, bo.Max)
		}
		if least < bo.Window {
			t.Fatalf("%+v: %d retries span at least %s, less than the window", bo, bo.MaxRetry(), least)
		}
	}
	if tasks.DefaultWebhookBackoff.Window != 24*time.Hour {
		t.Fatalf("the default window is %s, want a day", tasks.DefaultWebhookBackoff.Window)
	}
	queued := time.Now()
	if b.Expired(queued, queued.Add(59*time.Minute)) || !b.Expired(queued, queued.Add(time.Hour)) {
		t.Fatal("Expired does not end at the window")
	}
}
