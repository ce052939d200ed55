package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
)

// Enqueuer is what dispatching needs of *asynq.Client.
type Enqueuer interface {
	EnqueueContext(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error)
}

// enqueue puts j in the queue. A TaskID conflict means the same job is
// already queued: duplicate is true and err nil.
func enqueue(ctx context.Context, q Enqueuer, j Job) (duplicate bool, err error) {
	_, err = q.EnqueueContext(ctx, j.Task, j.Options()...)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("enqueue %s: %w", j.ID, err)
	}
	return false, nil
}

// OutboxCleaner clears outbox entries (store.Outbox).
type OutboxCleaner interface {
	OutboxDone(ctx context.Context, ids ...string) error
}

// ErrOutboxLeft means the task is in the queue but its outbox entry could
// not be removed. That loses nothing: the relay finds the entry, gets a
// TaskID conflict (or a delivery mark that says sent) and clears it. Callers
// log it; it is not a failed enqueue.
var ErrOutboxLeft = errors.New("task enqueued, outbox entry left for the relay")

// Dispatch enqueues j and then clears its outbox entry. When the enqueue
// fails the entry stays, and the relay enqueues it later.
func Dispatch(ctx context.Context, q Enqueuer, s OutboxCleaner, j Job) (duplicate bool, err error) {
	if duplicate, err = enqueue(ctx, q, j); err != nil {
		return false, err
	}
	if err := s.OutboxDone(ctx, j.ID); err != nil {
		return duplicate, fmt.Errorf("%s: %w: %w", j.ID, ErrOutboxLeft, err)
	}
	return duplicate, nil
}

// Dispatcher is Dispatch for the request path: it enqueues at once but
// clears outbox entries in batches in the background, saving a Redis round
// trip per request. An entry whose clearing is lost to a crash is handled
// by the relay like any other leftover, so batching trades nothing away.
type Dispatcher struct {
	queue Enqueuer
	store OutboxCleaner
	log   *slog.Logger
	done  chan string
	stop  chan struct{}
	wg    sync.WaitGroup
}

const (
	clearBatch = 256
	clearEvery = 20 * time.Millisecond
)

// NewDispatcher starts a Dispatcher; Close flushes it.
func NewDispatcher(q Enqueuer, s OutboxCleaner, log *slog.Logger) *Dispatcher {
	if log == nil {
		log = slog.Default()
	}
	d := &Dispatcher{queue: q, store: s, log: log, done: make(chan string, 4*clearBatch), stop: make(chan struct{})}
	d.wg.Add(1)
	go d.clearLoop()
	return d
}

// Dispatch enqueues j and schedules its outbox entry for clearing.
func (d *Dispatcher) Dispatch(ctx context.Context, j Job) (duplicate bool, err error) {
	if duplicate, err = enqueue(ctx, d.queue, j); err != nil {
		return false, err
	}
	select {
	case d.done <- j.ID:
	default: // the clearer is behind: do this one inline
		if err := d.store.OutboxDone(ctx, j.ID); err != nil {
			d.log.Warn("outbox: clearing failed, the relay will clear it", "err", err)
		}
	}
	return duplicate, nil
}

func (d *Dispatcher) clearLoop() {
	defer d.wg.Done()
	t := time.NewTicker(clearEvery)
	defer t.Stop()
	batch := make([]string, 0, clearBatch)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := d.store.OutboxDone(ctx, batch...); err != nil {
			d.log.Warn("outbox: clearing failed, the relay will clear these", "entries", len(batch), "err", err)
		}
		cancel()
		batch = batch[:0]
	}
	for {
		select {
		case id := <-d.done:
			if batch = append(batch, id); len(batch) == clearBatch {
				flush()
			}
		case <-t.C:
			flush()
		case <-d.stop:
			for {
				select {
				case id := <-d.done:
					batch = append(batch, id)
				default:
					flush()
					return
				}
			}
		}
	}
}

// Close clears what is pending and stops.
func (d *Dispatcher) Close() {
	close(d.stop)
	d.wg.Wait()
}

// JobDispatcher enqueues a job whose outbox entry the store already holds.
type JobDispatcher interface {
	Dispatch(ctx context.Context, j Job) (duplicate bool, err error)
}
