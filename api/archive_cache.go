package api

import (
	"context"
	"sync"
	"time"
)

// archiveCache keeps the archive's answers in the process. Sent issues
// never change, so an answer stays right until another issue becomes
// sent; the store bumps a generation counter in the same step
// (store.Issues.ArchiveGeneration). The cache reads that counter at most
// once per recheck interval, one request at a time, and drops everything
// when it moved. So after the first request for a page, serving it costs
// no store round trip, and the whole process costs the store one small
// read per interval however many requests it serves; a newly sent issue
// shows within the interval. (A TTL alone would either keep a new issue
// out for the whole TTL or re-read every page each TTL; a generation
// read on every request would be a round trip per request.)
type archiveCache struct {
	recheck time.Duration
	now     func() time.Time

	mu       sync.Mutex
	gen      int64
	known    bool      // gen was read at least once
	checked  time.Time // when gen was last read
	reading  bool      // a request is reading gen now
	answers  map[string]archived
	building map[string]chan struct{} // keys being built: others wait
}

func newArchiveCache(recheck time.Duration, now func() time.Time) *archiveCache {
	if recheck <= 0 {
		recheck = DefaultArchiveRecheck
	}
	return &archiveCache{recheck: recheck, now: now, answers: map[string]archived{}, building: map[string]chan struct{}{}}
}

type generations interface {
	ArchiveGeneration(ctx context.Context) (int64, error)
}

// fresh reads the generation when it is due (only one request does; the
// others go on with the answers they have) and drops the answers when
// it moved. A store that fails keeps the answers: stale pages are better
// than none, and the next interval tries again.
func (c *archiveCache) fresh(ctx context.Context, st generations) error {
	c.mu.Lock()
	due := !c.known || c.now().Sub(c.checked) >= c.recheck
	if !due || (c.reading && c.known) {
		c.mu.Unlock()
		return nil
	}
	c.reading = true
	c.mu.Unlock()
	gen, err := st.ArchiveGeneration(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reading = false
	if err != nil {
		if c.known {
			c.checked = c.now()
			return nil
		}
		return err
	}
	if !c.known || gen != c.gen {
		c.answers = map[string]archived{}
	}
	c.gen, c.known, c.checked = gen, true, c.now()
	return nil
}

// get is the answer for key, built once per generation: concurrent
// requests for a key not yet built wait for the one building it.
func (c *archiveCache) get(ctx context.Context, st generations, key string, build func() (archived, error)) (archived, error) {
	if err := c.fresh(ctx, st); err != nil {
		return archived{}, err
	}
	for {
		c.mu.Lock()
		if a, ok := c.answers[key]; ok {
			c.mu.Unlock()
			return a, nil
		}
		wait, busy := c.building[key]
		if !busy {
			done := make(chan struct{})
			c.building[key] = done
			gen := c.gen
			c.mu.Unlock()
			a, err := build()
			c.mu.Lock()
			delete(c.building, key)
			close(done)
			// An answer built while the generation moved may miss the
			// new issue: it serves this request, not the next.
			if err == nil && gen == c.gen {
				if len(c.answers) >= archiveCacheEntries {
					for k := range c.answers {
						delete(c.answers, k)
						break
					}
				}
				c.answers[key] = a
			}
			c.mu.Unlock()
			return a, err
		}
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return archived{}, ctx.Err()
		}
	}
}
