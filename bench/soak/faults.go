package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A fault is one injected failure, from its start to its end (for a
// kill: until the process is up again).
type fault struct {
	name       string
	start, end time.Time
	err        string
}

// chaos injects faults at random moments, several at once, never two on
// the same target (a role, Redis, the mail path).
type chaos struct {
	roles []*role
	redis redisBackend
	mail  *mailPath
	sms   *smsPath

	mu     sync.Mutex
	busy   map[string]bool
	faults []fault
}

// run starts a fault about every gap (uniform between half and one and a
// half of it) until ctx ends, and waits for the ones running to end.
func (c *chaos) run(ctx context.Context, gap time.Duration) {
	var wg sync.WaitGroup
	for {
		wait := gap/2 + time.Duration(rand.Int64N(int64(gap)))
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-time.After(wait):
		}
		target, do := c.pickFault()
		if !c.claim(target) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.release(target)
			f := fault{start: time.Now()}
			name, err := do()
			f.name, f.end = name, time.Now()
			if err != nil {
				f.err = err.Error()
			}
			c.mu.Lock()
			c.faults = append(c.faults, f)
			c.mu.Unlock()
		}()
	}
}

func (c *chaos) claim(target string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy[target] {
		return false
	}
	c.busy[target] = true
	return true
}

func (c *chaos) release(target string) {
	c.mu.Lock()
	delete(c.busy, target)
	c.mu.Unlock()
}

// pickFault draws a fault: a role killed or stopped (half of the
// draws), the Redis primary killed, or trouble on the mail path.
func (c *chaos) pickFault() (string, func() (string, error)) {
	r := rand.Float64()
	switch {
	case r < 0.5:
		ro := c.roles[rand.IntN(len(c.roles))]
		sig, how := syscall.SIGKILL, "kill -9"
		if rand.IntN(2) == 0 {
			sig, how = syscall.SIGTERM, "SIGTERM"
		}
		return ro.name, func() (string, error) {
			ro.stop(sig)
			time.Sleep(time.Duration(1+rand.IntN(5)) * time.Second) // the orchestrator's pause
			return how + " " + ro.name, ro.start()
		}
	case r < 0.6:
		return "redis", func() (string, error) {
			return "kill -9 Redis primary", c.redis.killPrimary(context.Background())
		}
	case r < 0.7:
		return c.skewClock()
	case r < 0.85:
		return "mail", c.mailFault()
	default:
		return "sms", c.smsFault()
	}
}

// skewClock restarts one of the workers with its clock 90 s ahead or
// behind (NEWSLETTER_CLOCK_OFFSET) for 20-40 s, then restarts it on the
// machine's clock.
func (c *chaos) skewClock() (string, func() (string, error)) {
	var workers []*role
	for _, r := range c.roles {
		if strings.HasPrefix(r.name, "worker") {
			workers = append(workers, r)
		}
	}
	w := workers[rand.IntN(len(workers))]
	offset := []string{"90s", "-90s"}[rand.IntN(2)]
	hold := time.Duration(20+rand.IntN(20)) * time.Second
	return w.name, func() (string, error) {
		name := fmt.Sprintf("clock of %s skewed %s for %s", w.name, offset, hold)
		if err := w.restartWith([]string{"NEWSLETTER_CLOCK_OFFSET=" + offset}); err != nil {
			return name, err
		}
		time.Sleep(hold)
		return name, w.restartWith(nil)
	}
}

// mailFault is a few seconds of one kind of trouble on the mail path.
func (c *chaos) mailFault() func() (string, error) {
	hold := time.Duration(5+rand.IntN(20)) * time.Second
	kinds := []struct{ name, toxic, attrs string }{
		{"SMTP latency 2s", "latency", `{"latency":2000,"jitter":500}`},
		{"SMTP hung (no bytes back)", "timeout", `{"timeout":0}`},
		{"SMTP connections reset", "reset_peer", `{"timeout":200}`},
		{"SMTP 421 storm", "", ""},
	}
	k := kinds[rand.IntN(len(kinds))]
	return func() (string, error) {
		name := fmt.Sprintf("%s for %s", k.name, hold)
		if k.toxic == "" {
			c.mail.setStorm(true)
			time.Sleep(hold)
			c.mail.setStorm(false)
			return name, nil
		}
		off, err := c.mail.toxic(k.toxic, k.attrs)
		if err != nil {
			return name, err
		}
		time.Sleep(hold)
		off()
		return name, nil
	}
}

// smsFault is a few seconds of one kind of trouble between the sms lane
// and its gateway: the proxy's latency, hang or resets, or the fake's
// storm of 429 or 503 answers (with Retry-After: 1).
func (c *chaos) smsFault() func() (string, error) {
	hold := time.Duration(5+rand.IntN(20)) * time.Second
	kinds := []struct {
		name, toxic, attrs string
		storm              int
	}{
		{"SMS latency 2s", "latency", `{"latency":2000,"jitter":500}`, 0},
		{"SMS gateway hung (no bytes back)", "timeout", `{"timeout":0}`, 0},
		{"SMS connections reset", "reset_peer", `{"timeout":200}`, 0},
		{"SMS 429 storm", "", "", 429},
		{"SMS 503 storm", "", "", 503},
	}
	k := kinds[rand.IntN(len(kinds))]
	return func() (string, error) {
		name := fmt.Sprintf("%s for %s", k.name, hold)
		if k.toxic == "" {
			c.sms.storm(k.storm)
			time.Sleep(hold)
			c.sms.storm(0)
			return name, nil
		}
		off, err := c.sms.toxic(k.toxic, k.attrs)
		if err != nil {
			return name, err
		}
		time.Sleep(hold)
		off()
		return name, nil
	}
}

// during tells whether t falls inside a fault.
func (c *chaos) during(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.faults {
		if !t.Before(f.start) && !t.After(f.end) {
			return true
		}
	}
	return false
}

// activeAt counts the faults running at t.
func (c *chaos) activeAt(t time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, f := range c.faults {
		if !t.Before(f.start) && !t.After(f.end) {
			n++
		}
	}
	return n
}
