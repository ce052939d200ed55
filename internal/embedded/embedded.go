// Package embedded runs the in-process Redis of the embedded default (an
// in-memory miniredis on a loopback port) so `make run` and `make test` need
// nothing but Go.
//
// miniredis only expires keys when told that time has passed; Start drives
// that from the wall clock, so delivery-mark claims and rate-limit windows
// expire as they would on a real server.
package embedded

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Redis is a running in-memory Redis.
type Redis struct {
	m    *miniredis.Miniredis
	stop chan struct{}
	wg   sync.WaitGroup
}

// tick is how often expiry is advanced: a TTL is honoured to within it.
const tick = 20 * time.Millisecond

// Start starts an in-memory Redis on addr ("" or "127.0.0.1:0" for any free
// loopback port).
func Start(addr string) (*Redis, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr(addr); err != nil {
		return nil, fmt.Errorf("start embedded redis on %s: %w", addr, err)
	}
	r := &Redis{m: m, stop: make(chan struct{})}
	r.wg.Add(1)
	go r.advance()
	return r, nil
}

func (r *Redis) advance() {
	defer r.wg.Done()
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.m.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Addr is the host:port it listens on.
func (r *Redis) Addr() string { return r.m.Addr() }

// URL is the redis:// URL that reaches it, for NEWSLETTER_REDIS_URL.
func (r *Redis) URL() string { return "redis://" + r.m.Addr() + "/0" }

// Close stops the server; everything in it is gone.
func (r *Redis) Close() {
	close(r.stop)
	r.wg.Wait()
	r.m.Close()
}
