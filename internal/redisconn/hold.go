package redisconn

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// DefaultWait is how long a command sent under WaitOut waits for a Redis
// that cannot be reached before it gives up: longer than a restart or a
// Sentinel failover takes, and shorter than asynq's lease on a task (30 s
// from its last heartbeat, and the heartbeats stop with Redis).
//
// A worker task that gave up at once used to hand itself back to asynq
// while asynq could not record that either: the hand-back was lost, and
// the task ran again only when asynq's recoverer found its lease expired,
// a minute or two after Redis was back. Waiting in place, the task carries
// on within a second of Redis coming back, holding its claims and its
// place in the send rate; asynq renews its lease at the next heartbeat.
const DefaultWait = 30 * time.Second

// The pauses between two tries of a held command: short at first, as a
// restart is over in a moment, then no busier than once a second.
const (
	firstPause = 50 * time.Millisecond
	lastPause  = time.Second
)

// Wait is how the commands sent under a context wait out an unreachable
// Redis (WaitOut).
type Wait struct {
	// For bounds one command's wait (DefaultWait when zero or less).
	For time.Duration
	// Log gets a line when Redis goes away and when it is back (nil:
	// slog.Default()).
	Log *slog.Logger
	// Resend also sends again a command whose connection broke after it
	// was written (EOF, a reset, a read timeout), which may have run: for
	// the caller whose commands are safe to run twice (the sent marks:
	// setting a bit twice sets it once), and who would otherwise lose the
	// write to a primary that died with it unanswered or unreplicated.
	Resend bool
}

type waitKey struct{}

// WaitOut returns ctx whose Redis commands, on a client built by Client
// (or given Hold), wait for a Redis that cannot be reached rather than
// fail at once: the worker's tasks, which lose more by failing than by
// waiting (DefaultWait). Without it a command fails at once, as the API's
// must (it answers 503 while Redis is away).
func WaitOut(ctx context.Context, w Wait) context.Context {
	if w.For <= 0 {
		w.For = DefaultWait
	}
	if w.Log == nil {
		w.Log = slog.Default()
	}
	return context.WithValue(ctx, waitKey{}, w)
}

// WaitOf is how ctx's commands wait out Redis, and whether they do.
func WaitOf(ctx context.Context) (Wait, bool) {
	w, ok := ctx.Value(waitKey{}).(Wait)
	return w, ok
}

// heldSeconds is newsletter_redis_held_seconds: one histogram for the
// process, as the commands of every client count alike (RegisterMetrics).
var heldSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name: "newsletter_redis_held_seconds",
	Help: "Redis commands held while Redis could not be reached (worker tasks only), and how long, by result: through (Redis came back), gave_up (the wait's bound or the task's end).",
	// From one pause to past DefaultWait.
	Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60},
}, []string{"result"})

// The values of newsletter_redis_held_seconds's result label.
const (
	heldThrough = "through"
	heldGaveUp  = "gave_up"
)

func init() {
	// Both series from the start: increase() sees the first held command.
	for _, r := range []string{heldThrough, heldGaveUp} {
		heldSeconds.WithLabelValues(r)
	}
}

// RegisterMetrics registers newsletter_redis_held_seconds in reg: once per
// registry, by the role whose commands wait (the worker).
func RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(heldSeconds)
}

// Hold adds to c the hook that holds the commands sent under WaitOut while
// Redis cannot be reached. Client adds it to every client it builds; the
// commands of a context without WaitOut pass through it untouched.
func Hold(c redis.UniversalClient) {
	c.AddHook(&holdHook{})
}

// holdHook holds a command sent under WaitOut whose Redis was not
// reached, and sends it again, backing off from firstPause to lastPause,
// until it goes through or its wait ends (its bound, or its context).
//
// Only a command that surely did not run is sent again (notReached): a
// dial that failed, a pool with no connection to give, or a Redis that
// refused it unrun (still loading, a replica since a failover, a cluster
// failing over). A command whose connection broke after it was written
// (EOF, a reset, a read timeout) may have run: the hook hands that error
// to the caller as it is. go-redis itself sends such a command again, on
// every client and with or without this hook (its MaxRetries, three by
// default), and when that new try finds Redis gone (a refused dial) the
// hook holds it: a command may then run twice, as it could before (the
// worker's steps each waited out both kinds of error, so each was written
// to be safe to run twice, and a task as a whole may run again anyway).
//
// It logs when Redis goes away (the first command held) and when it is
// back (the first command through after that), not per command.
type holdHook struct {
	// awaySince is when the first command was held (Unix nanoseconds);
	// 0 while Redis answers.
	awaySince atomic.Int64
	// holding counts the commands in their wait now: how a test knows
	// its commands are held rather than still in go-redis's own tries.
	holding atomic.Int64
}

func (h *holdHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.hold(ctx, func(ctx context.Context) error { return next(ctx, cmd) })
	}
}

// ProcessPipelineHook holds a pipeline or a transaction whole: each try
// sends all its commands again, and each command's answer is the last
// try's.
func (h *holdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.hold(ctx, func(ctx context.Context) error { return next(ctx, cmds) })
	}
}

// hold runs send, and again while its Redis was not reached and ctx waits
// out Redis.
func (h *holdHook) hold(ctx context.Context, send func(context.Context) error) error {
	err := send(ctx)
	w, waits := WaitOf(ctx)
	if !waits {
		return err
	}
	again := func(err error) bool { return notReached(err) || w.Resend && brokeAfterWrite(err) }
	if !again(err) {
		if err == nil {
			h.back(w.Log)
		}
		return err
	}
	start := time.Now()
	giveUp := start.Add(w.For)
	h.gone(w, err)
	h.holding.Add(1)
	defer h.holding.Add(-1)
	for pause := firstPause; again(err); pause = min(2*pause, lastPause) {
		if time.Now().Add(pause).After(giveUp) || !sleep(ctx, pause) {
			heldSeconds.WithLabelValues(heldGaveUp).Observe(time.Since(start).Seconds())
			return err
		}
		err = send(ctx)
	}
	heldSeconds.WithLabelValues(heldThrough).Observe(time.Since(start).Seconds())
	if err == nil {
		h.back(w.Log)
	}
	return err
}

// sleep waits d, or less if ctx ends first (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// gone notes a held command, and logs Redis away if it is the first.
func (h *holdHook) gone(w Wait, err error) {
	if h.awaySince.CompareAndSwap(0, time.Now().UnixNano()) {
		w.Log.Warn("Redis away: worker steps wait for it", "up_to", w.For, "err", err)
	}
}

// back logs Redis back if commands were held since it last answered.
func (h *holdHook) back(log *slog.Logger) {
	if h.awaySince.Load() == 0 { // the common case: read, not written
		return
	}
	if since := h.awaySince.Swap(0); since != 0 {
		log.Info("Redis is back: held worker steps go on", "away_for", time.Since(time.Unix(0, since)).Round(time.Millisecond))
	}
}

// notReached tells whether err says the command did not reach Redis, or
// reached it and was refused unrun, because Redis cannot serve it yet:
// what waiting cures, and what is safe to send again (holdHook).
func notReached(err error) bool {
	if err == nil || errors.Is(err, redis.ErrClosed) { // closed: ours, and for good
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	// A Redis that is up but not serving yet (LOADING, a script running:
	// BUSY), a primary a Sentinel failover demoted (READONLY) or that lost
	// its replicas (MASTERDOWN), and every node of a cluster while a
	// primary is lost and its replica not yet promoted (CLUSTERDOWN, some
	// seconds: every slot refused) or its slots move (TRYAGAIN). Each
	// answers before running the command.
	msg := re.Error()
	for _, p := range []string{"LOADING ", "BUSY ", "READONLY ", "MASTERDOWN ", "CLUSTERDOWN ", "TRYAGAIN "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// brokeAfterWrite tells whether err says the connection broke after the
// command was written: it may have run (Wait.Resend).
func brokeAfterWrite(err error) bool {
	if err == nil || errors.Is(err, redis.ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

var _ redis.Hook = (*holdHook)(nil)
