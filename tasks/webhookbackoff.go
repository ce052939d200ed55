package tasks

import (
	"math/rand/v2"
	"time"
)

// WebhookBackoff is how a failed webhook delivery is retried: exponential
// delays from Base, doubling up to Max, each drawn from the upper half of
// its window (equal jitter, so endpoints that fail together do not come
// back together), for Window after the event was queued. Then the event
// is a dead letter. It is the task's retry schedule (TypeWebhook's
// MaxRetry and retention), so it lives with the task, not the channel.
type WebhookBackoff struct {
	Base, Max, Window time.Duration
}

// DefaultWebhookBackoff: 30 s, 1 min, 2 min … up to 2 h between
// attempts, for 24 hours (about twenty attempts).
var DefaultWebhookBackoff = WebhookBackoff{Base: 30 * time.Second, Max: 2 * time.Hour, Window: 24 * time.Hour}

func (b WebhookBackoff) withDefaults() WebhookBackoff {
	if b.Base <= 0 {
		b.Base = DefaultWebhookBackoff.Base
	}
	if b.Max <= 0 {
		b.Max = DefaultWebhookBackoff.Max
	}
	if b.Window <= 0 {
		b.Window = DefaultWebhookBackoff.Window
	}
	return b
}

// window is the n-th retry's delay before jitter (n from 0).
func (b WebhookBackoff) window(n int) time.Duration {
	d := b.Base
	for ; n > 0 && d < b.Max; n-- {
		d *= 2
	}
	return min(d, b.Max)
}

// Delay is the wait before retry n+1 (n retries so far). An endpoint's
// Retry-After (wait) is honoured up to Max.
func (b WebhookBackoff) Delay(n int, wait time.Duration) time.Duration {
	b = b.withDefaults()
	d := b.window(n)
	d = d/2 + rand.N(d/2+1)
	if wait > d {
		d = min(wait, b.Max)
	}
	return d
}

// MaxRetry is the task's retry ceiling: enough retries that even the
// shortest draws of the jitter span Window. What ends an event's retries
// is Window (the handler's check); this bound is asynq's.
func (b WebhookBackoff) MaxRetry() int {
	b = b.withDefaults()
	var sum time.Duration
	n := 0
	for sum < b.Window {
		sum += b.window(n) / 2
		n++
	}
	return n + 1
}

// Expired tells whether an event queued at queued is past the window at
// now: its last failure makes it a dead letter.
func (b WebhookBackoff) Expired(queued, now time.Time) bool {
	return now.Sub(queued) >= b.withDefaults().Window
}
