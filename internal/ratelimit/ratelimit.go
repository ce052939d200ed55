// Package ratelimit is a per-key limit of n events per window, kept in the
// process: per client address, for the signup form and failed admin logins.
// The send rate across workers is elsewhere (internal/pace, in Redis).
package ratelimit

import (
	"sync"
	"time"
)

// Limiter is a per-key GCRA (a leaky bucket kept as one timestamp per
// key): n events per window, with a burst of n.
type Limiter struct {
	mu       sync.Mutex
	interval time.Duration // window / n
	burst    time.Duration // how far ahead of now a key's TAT may run
	tat      map[string]time.Time
	now      func() time.Time
	sweeps   int
}

// New allows n events per window per key; now is the clock (nil:
// time.Now).
func New(n int, window time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	interval := window / time.Duration(n)
	return &Limiter{interval: interval, burst: interval * time.Duration(n-1), tat: map[string]time.Time{}, now: now}
}

// Blocked reports, without counting an event, whether key has used its
// events up, and if so for how long.
func (l *Limiter) Blocked(key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	tat, ok := l.tat[key]
	if !ok || !tat.After(now) {
		return false, 0 // never seen, or every event refilled
	}
	wait := tat.Sub(now) - l.burst
	return wait > 0, max(wait, 0)
}

// Allow counts an event of key and reports whether it was allowed, and if
// not, how long until one is.
func (l *Limiter) Allow(key string) (bool, time.Duration) {
	wait, ok := l.Reserve(key, 0)
	return ok, wait
}

// Reserve counts an event of key that is willing to wait up to maxWait for
// its turn: it returns how long the caller must wait before the event
// conforms (0: at once), and true. When the turn is further away than
// maxWait, nothing is counted and it returns the wait and false. Events
// that wait take their turns one after another, so a key's rate holds
// however many of its events arrive at once.
func (l *Limiter) Reserve(key string, maxWait time.Duration) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	tat := l.tat[key]
	if tat.Before(now) {
		tat = now
	}
	wait := max(tat.Sub(now)-l.burst, 0)
	if wait > maxWait {
		return wait, false
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
	return wait, true
}
