package worker

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/tasks"
)

// Config configures the worker role: one asynq server per lane.
type Config struct {
	// Concurrency is the e-mail lane's pool when Lanes is empty.
	Concurrency     int
	ShutdownTimeout time.Duration
	Retry           RetryPolicy
	Log             *slog.Logger
	// PollInterval is how often due scheduled and retry tasks are moved
	// into their queues (asynq's DelayedTaskCheckInterval, default 5s),
	// and at most how long an idle worker waits before looking for new
	// work (TaskCheckInterval, default 1s).
	PollInterval time.Duration
	// RetryDelay replaces Retry.Delay (tests record the delays with it).
	RetryDelay asynq.RetryDelayFunc
	// Event bundling: how long a person's group waits for more events
	// after the last one, at most after the first, and at most how many
	// events one mail lists. Events are bundled in the e-mail lane.
	GroupGrace    time.Duration
	GroupMaxDelay time.Duration
	GroupMaxSize  int
	// Lanes are the lanes this worker serves (NEWSLETTER_LANES, `worker
	// --lanes`); empty: the e-mail lane alone, with Concurrency workers.
	Lanes []Lane
}

// Lane is one lane's pool of workers: an asynq server of its own, with its
// own concurrency, queues, retry policy and shared rate. Pools share
// nothing but the Redis connection, so tasks that hang in one lane (a push
// service that never answers) hold that lane's workers only.
type Lane struct {
	Name string // tasks.LaneEmail, tasks.LanePush, tasks.LaneWebhook
	// Queues is the lane's asynq Queues map (nil: tasks.LaneQueues[Name]).
	Queues      map[string]int
	Concurrency int
	// Handlers are the lane's task types (nil: the worker's Handlers'
	// routes whose queues are this lane's, routes.go). A lane without
	// handlers is not started (New logs it): its tasks wait in its queues
	// for a worker that has them, rather than failing as unknown types.
	Handlers map[string]asynq.Handler
	// Pace is the lane's rate shared by all its workers
	// (pace.NewLane): every task takes one slot before it runs, waiting
	// in place for a short wait and handing itself back to the queue,
	// not as a failure, for a long one. nil: none (the e-mail lane paces
	// each mail in its handlers, by receiving domain).
	Pace RateLimiter
	// Retry is the lane's backoff (nil: the webhook and push lanes' own
	// senders', which honour the endpoint's Retry-After; the Config's for
	// the e-mail lane); IsFailure says which errors count against a
	// task's retries (nil: IsFailure).
	Retry     asynq.RetryDelayFunc
	IsFailure func(error) bool
}

// RateLimiter is a shared send rate (*pace.Limiter).
type RateLimiter interface {
	TakeN(ctx context.Context, n int) (int, time.Duration, error)
}

// Worker is one asynq server per lane, with the service's handlers.
type Worker struct {
	pools    []pool
	handlers Handlers
}

// Handlers are the worker's components, one per kind of task.
type Handlers struct {
	Mails *Mails // email:confirm, email:unsubscribe
	// Sequence sends the onboarding steps (email:welcome, email:step).
	Sequence *SequenceSender
	Planner  *Planner     // digest:plan
	Events   *EventSender // email:events
	// Issues plans and sends a publisher's issues (issue:plan, email:issue).
	Issues *IssueSender
	// Feedback applies bounce and complaint reports (feedback:record).
	Feedback *FeedbackRecorder
	// Feeds polls the topics file's feeds (feeds:poll).
	Feeds *FeedPoller
	// Webhooks deliver webhook events (webhook:deliver).
	Webhooks *WebhookSender
	// Fanout fans events and issues' notifications out to the lanes
	// (event:fanout) and mails a topic's event (email:event).
	Fanout *FanoutSender
	// Push notifies browsers (push:deliver, the push lane); nil without
	// web push (no VAPID keys).
	Push *PushSender
	// SMS texts people's numbers (sms:deliver, the sms lane); nil
	// without an SMS gateway.
	SMS *SMSSender
	// Channels run the channels added through the seam ("<name>:deliver",
	// each in the lane of its name), by name.
	Channels map[string]*ChannelLane
	// Imports run the console's CSV imports (import:run); nil: none.
	Imports *ImportRunner
	// Invites mail the console's invites (email:invite).
	Invites *InviteMailer
	// ListJobs run the list's bulk actions and exports
	// (subscribers:bulk, export:run); nil: none.
	ListJobs *ListJobRunner
	// Metrics are written by the middleware for every task.
	Metrics *Metrics
	// RedisWait is how every task's Redis commands wait out a Redis that
	// cannot be reached (waitingOutRedis).
	RedisWait redisconn.Wait
}

// pool is one lane's server and handlers.
type pool struct {
	lane string
	srv  *asynq.Server
	mux  *asynq.ServeMux
}

// New builds a worker on rdb (not closed by the worker). It panics on a
// lane without queues: lane names are checked where they are configured
// (tasks.ParseLanes).
func New(rdb redis.UniversalClient, cfg Config, h Handlers) *Worker {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	retryDelay := cfg.RetryDelay
	if retryDelay == nil {
		retryDelay = cfg.Retry.Delay
	}
	lanes := cfg.Lanes
	if len(lanes) == 0 {
		lanes = defaultLanes(cfg, h)
	}
	w := &Worker{handlers: h}
	for _, l := range lanes {
		l = h.completeLane(l, retryDelay)
		if len(l.Handlers) == 0 {
			log.Info("lane not served: this worker has no handlers for its tasks; they wait in its queues", "lane", l.Name)
			continue
		}
		w.pools = append(w.pools, h.newPool(rdb, cfg, log, l))
	}
	return w
}

// defaultLanes are the lanes of a worker configured without a lane list
// (tests, embedders): e-mail, and webhooks and push in a small pool of
// their own when there is a sender for them.
func defaultLanes(cfg Config, h Handlers) []Lane {
	lanes := []Lane{{Name: tasks.LaneEmail, Concurrency: cfg.Concurrency}}
	if h.Push != nil {
		lanes = append(lanes, Lane{Name: tasks.LanePush, Concurrency: max(1, cfg.Concurrency/2)})
	}
	if h.Webhooks != nil {
		lanes = append(lanes, Lane{Name: tasks.LaneWebhook, Concurrency: max(1, cfg.Concurrency/2)})
	}
	if h.SMS != nil {
		lanes = append(lanes, Lane{Name: tasks.LaneSMS, Concurrency: max(1, cfg.Concurrency/2)})
	}
	for _, name := range slices.Sorted(maps.Keys(h.Channels)) {
		lanes = append(lanes, Lane{Name: name, Concurrency: max(1, cfg.Concurrency/2)})
	}
	return lanes
}

// completeLane fills in what the lane's configuration leaves out: its
// queues, the handlers this worker has for its tasks and their retry
// policy. It panics on a lane without queues (see New). A lane left
// without handlers is not served by this worker.
func (h Handlers) completeLane(l Lane, retryDelay asynq.RetryDelayFunc) Lane {
	if l.Queues == nil {
		l.Queues = tasks.LaneQueues[l.Name]
	}
	if len(l.Queues) == 0 {
		panic(fmt.Sprintf("worker: lane %q has no queues", l.Name))
	}
	if l.Handlers == nil {
		l.Handlers = h.lane(l.Name)
	}
	switch {
	case l.Retry != nil:
	case l.Name == tasks.LaneWebhook && h.Webhooks != nil:
		// Webhooks retry on their own schedule (a day, the
		// endpoint's Retry-After), not the mail's.
		l.Retry = h.Webhooks.RetryDelay
	case l.Name == tasks.LanePush && h.Push != nil:
		// Push services ask for their own waits (Retry-After).
		l.Retry = h.Push.RetryDelay
	case l.Name == tasks.LaneSMS && h.SMS != nil:
		l.Retry = h.SMS.RetryDelay
	case h.Channels[l.Name] != nil:
		l.Retry = h.Channels[l.Name].RetryDelay
	}
	if len(l.Handlers) == 0 {
		return l
	}
	if l.Retry == nil {
		l.Retry = retryDelay
	}
	if l.IsFailure == nil {
		l.IsFailure = IsFailure
	}
	return l
}

// newPool is the asynq server and handler chain of one served lane.
func (h Handlers) newPool(rdb redis.UniversalClient, cfg Config, log *slog.Logger, l Lane) pool {
	acfg := asynq.Config{
		Concurrency:     l.Concurrency,
		Queues:          l.Queues,
		ShutdownTimeout: cfg.ShutdownTimeout,
		RetryDelayFunc:  l.Retry,
		IsFailure:       l.IsFailure,
		Logger:          asynqLogger{log.With("component", "asynq", "lane", l.Name)},
		LogLevel:        asynq.WarnLevel,

		DelayedTaskCheckInterval: cfg.PollInterval,
		TaskCheckInterval:        min(cfg.PollInterval, time.Second),
	}
	if l.Name == tasks.LaneEmail {
		// Grouped tasks (one person's events, made one mail) are e-mail.
		acfg.GroupAggregator = Aggregator(log)
		acfg.GroupGracePeriod = cfg.GroupGrace
		acfg.GroupMaxDelay = cfg.GroupMaxDelay
		acfg.GroupMaxSize = cfg.GroupMaxSize
	}
	mux := asynq.NewServeMux()
	mux.Use(Observe(log, h.Metrics), waitingOutRedis(h.RedisWait))
	if l.Pace != nil {
		mux.Use(paceLane(l.Pace))
	}
	for typ, handler := range l.Handlers {
		mux.Handle(typ, handler)
		h.Metrics.forType(typ)
	}
	return pool{lane: l.Name, srv: asynq.NewServerFromRedisClient(rdb, acfg), mux: mux}
}

// Lanes are the lanes this worker serves, in the order configured.
func (w *Worker) Lanes() []string {
	names := make([]string, len(w.pools))
	for i, p := range w.pools {
		names[i] = p.lane
	}
	return names
}

// Start begins processing in every lane. If one lane cannot start, those
// already started are shut down again.
func (w *Worker) Start() error {
	for i, p := range w.pools {
		if err := p.srv.Start(p.mux); err != nil {
			for _, started := range w.pools[:i] {
				started.srv.Shutdown()
			}
			return fmt.Errorf("start worker, lane %s: %w", p.lane, err)
		}
	}
	return nil
}

// Stop stops taking new tasks in every lane; running ones finish (SIGTSTP).
func (w *Worker) Stop() {
	for _, p := range w.pools {
		p.srv.Stop()
	}
}

// Shutdown waits up to the shutdown timeout for running tasks, then
// requeues what is left (it runs again elsewhere, guarded by its mark).
// The lanes shut down together, so the whole takes one timeout, not one
// per lane.
func (w *Worker) Shutdown() {
	var wg sync.WaitGroup
	for _, p := range w.pools {
		wg.Go(p.srv.Shutdown)
	}
	wg.Wait()
	w.handlers.Close()
}

// asynqLogger sends asynq's own log lines to slog.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...)) }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...)) }
func (a asynqLogger) Fatal(args ...any) { a.l.Error(fmt.Sprint(args...)) }
