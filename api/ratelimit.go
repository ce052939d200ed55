package api

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// limiter is a per-key GCRA (a leaky bucket kept as one timestamp per key):
// n requests per window, with a burst of n. It lives in the API process:
// its job is to stop one client flooding the form, and the send-rate
// limiter in Redis protects the mail gateway whatever the API lets in.
type limiter struct {
	mu       sync.Mutex
	interval time.Duration // window / n
	burst    time.Duration // how far ahead of now a key's TAT may run
	tat      map[string]time.Time
	now      func() time.Time
	sweeps   int
}

func newLimiter(n int, window time.Duration, now func() time.Time) *limiter {
	interval := window / time.Duration(n)
	return &limiter{interval: interval, burst: interval * time.Duration(n-1), tat: map[string]time.Time{}, now: now}
}

// allow reports whether key may make a request now, and if not, how long
// until it may.
func (l *limiter) allow(key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	tat := l.tat[key]
	if tat.Before(now) {
		tat = now
	}
	if wait := tat.Sub(now) - l.burst; wait > 0 {
		return false, wait
	}
	l.tat[key] = tat.Add(l.interval)
	if l.sweeps++; l.sweeps >= 10000 {
		l.sweeps = 0
		for k, t := range l.tat {
			if t.Before(now) {
				delete(l.tat, k)
			}
		}
	}
	return true, 0
}

// clientKey is the client's address. Behind a proxy every request would
// share the proxy's address; the limit is then per proxy, which fails safe.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
