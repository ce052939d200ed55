package tasks

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/newsletter/newsletter/internal/outbox"
)

// Relay enqueues outbox entries that a crash or a Redis blip left behind
// between the store write and the enqueue. It runs in every worker; the
// jobs' deterministic TaskIDs make concurrent relays harmless, and a job
// that already ran finds its delivery mark and sends nothing.
type Relay struct {
	Store OutboxReader
	Queue Enqueuer
	Log   *slog.Logger
	// Interval between scans (default 10s).
	Interval time.Duration
	// Grace is how long past its due time an entry must be before the relay
	// takes it (default 30s), so it does not race the API's own enqueue.
	Grace time.Duration
	Now   func() time.Time

	stop chan struct{}
	wg   sync.WaitGroup
}

// OutboxReader is what the relay reads of the store's outbox
// (store.Outbox): the entries due, and clearing those it queued.
type OutboxReader interface {
	OutboxDue(ctx context.Context, before time.Time, limit int) ([]outbox.Entry, error)
	OutboxDone(ctx context.Context, ids ...string) error
}

const relayBatch = 500

func (r *Relay) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default()
}

// RunOnce enqueues every entry due before now-Grace and returns how many it
// handled.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	grace := r.Grace
	if grace <= 0 {
		grace = 30 * time.Second
	}
	total := 0
	for {
		entries, err := r.Store.OutboxDue(ctx, now().Add(-grace), relayBatch)
		if err != nil {
			return total, err
		}
		for _, e := range entries {
			job, err := JobFromOutbox(e)
			if err != nil {
				r.log().Error("relay: dropping unreadable outbox entry", "err", err)
				if err := r.Store.OutboxDone(ctx, e.ID); err != nil {
					return total, err
				}
				continue
			}
			dup, err := Dispatch(ctx, r.Queue, r.Store, job)
			if errors.Is(err, ErrOutboxLeft) {
				r.log().Warn("relay: enqueued, but the entry stays for the next scan", "err", err)
			} else if err != nil {
				return total, err
			}
			r.log().Info("relay: enqueued a task the API did not", "type", job.Task.Type(), "already_queued", dup)
			total++
		}
		if len(entries) < relayBatch {
			return total, nil
		}
	}
}

// Start scans every Interval until Stop.
func (r *Relay) Start() {
	interval := r.Interval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	r.stop = make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if _, err := r.RunOnce(context.Background()); err != nil {
				r.log().Warn("relay: scan failed, will retry", "err", err)
			}
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the scans and waits for the current one.
func (r *Relay) Stop() {
	if r.stop != nil {
		close(r.stop)
		r.wg.Wait()
	}
}
