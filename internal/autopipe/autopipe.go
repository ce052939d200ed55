// Package autopipe sends the single Redis commands that concurrent callers
// issue at the same moment as one pipeline: one write and one read for
// many requests instead of one each. Under load that removes most of the
// system calls of a request path made of independent round trips (the
// API's signup: the store's script, then asynq's enqueue, neither of which
// can be pipelined by its caller). A lone command goes out at once, so
// nothing waits for a batch to fill.
package autopipe

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxBatch bounds one pipeline.
const maxBatch = 256

// Hook is a go-redis hook that batches single commands. Add it to a client
// with AddHook; it sends through exec, a client without the hook.
type Hook struct {
	exec    redis.UniversalClient
	calls   chan *call
	stop    chan struct{}
	wg      sync.WaitGroup
	batches atomic.Int64 // pipelines of more than one command, for tests
}

type call struct {
	ctx  context.Context
	cmd  redis.Cmder
	done chan struct{}
}

// New starts loops sending batches through exec.
func New(exec redis.UniversalClient, loops int) *Hook {
	h := &Hook{exec: exec, calls: make(chan *call, maxBatch), stop: make(chan struct{})}
	for i := 0; i < max(loops, 1); i++ {
		h.wg.Add(1)
		go h.loop()
	}
	return h
}

// Close stops the loops after the batches in flight.
func (h *Hook) Close() {
	close(h.stop)
	h.wg.Wait()
}

// DialHook implements redis.Hook.
func (h *Hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook implements redis.Hook: pipelines and transactions
// are already batched by their caller.
func (h *Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook implements redis.Hook.
func (h *Hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !batchable(cmd.Name()) {
			return next(ctx, cmd)
		}
		c := &call{ctx: ctx, cmd: cmd, done: make(chan struct{})}
		select {
		case h.calls <- c:
		case <-h.stop:
			return next(ctx, cmd)
		case <-ctx.Done():
			return ctx.Err()
		}
		// Once handed over the command is in a pipeline that will finish
		// by this caller's deadline at the latest (batchContext): wait
		// for it rather than leave its result to be written behind the
		// caller's back.
		<-c.done
		return cmd.Err()
	}
}

// batchable excludes commands that block the connection or change its
// state: those keep a connection to themselves.
func batchable(name string) bool {
	switch strings.ToLower(name) {
	case "blpop", "brpop", "brpoplpush", "blmove", "bzpopmin", "bzpopmax", "xread", "xreadgroup",
		"subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "multi", "exec", "discard",
		"watch", "unwatch", "wait", "select", "hello", "auth", "client", "quit", "monitor":
		return false
	}
	return true
}

func (h *Hook) loop() {
	defer h.wg.Done()
	batch := make([]*call, 0, maxBatch)
	for {
		select {
		case c := <-h.calls:
			batch = append(batch[:0], c)
		case <-h.stop:
			return
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case c := <-h.calls:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		h.send(batch)
	}
}

// batchContext carries the earliest deadline of the batch's callers: a
// batch waits no longer than its most impatient caller (a readiness probe's
// budget, a request's timeout), so a hung Redis answers them in time. The
// callers' cancellations are not carried over: the others of the batch
// still want their answers, and each caller waits for its own.
func batchContext(batch []*call) (context.Context, context.CancelFunc) {
	var earliest time.Time
	for _, c := range batch {
		if d, ok := c.ctx.Deadline(); ok && (earliest.IsZero() || d.Before(earliest)) {
			earliest = d
		}
	}
	if earliest.IsZero() {
		return context.Background(), func() {}
	}
	return context.WithDeadline(context.Background(), earliest)
}

func (h *Hook) send(batch []*call) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	if len(batch) == 1 {
		// The command carries its own result or error for its caller.
		_ = h.exec.Process(ctx, batch[0].cmd)
		close(batch[0].done)
		return
	}
	h.batches.Add(1)
	pipe := h.exec.Pipeline()
	for _, c := range batch {
		_ = pipe.Process(ctx, c.cmd) // queues only; no error before Exec
	}
	// Each command carries its own result or error; Exec's error is the
	// first of them, or the connection's, which it also sets on each.
	_, _ = pipe.Exec(ctx)
	for _, c := range batch {
		close(c.done)
	}
}
