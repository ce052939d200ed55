package worker

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/newsletter/newsletter/tasks"
	"github.com/redis/go-redis/v9"
)

// Config configures the asynq server of the worker role.
type Config struct {
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
	// events one mail lists.
	GroupGrace    time.Duration
	GroupMaxDelay time.Duration
	GroupMaxSize  int
}

// Worker is the asynq server with the service's handlers.
type Worker struct {
	srv      *asynq.Server
	mux      *asynq.ServeMux
	handlers Handlers
}

// Handlers are the worker's components, one per kind of task.
type Handlers struct {
	Mails *Mails // email:confirm, email:unsubscribe
	// Sequence sends the onboarding steps (email:welcome, email:step).
	Sequence *SequenceSender
	Planner  *Planner     // digest:plan
	Batches  *BatchSender // email:digest
	Events   *EventSender // email:events
	// Issues plans and sends a publisher's issues (issue:plan, email:issue).
	Issues *IssueSender
	// Feedback applies bounce and complaint reports (feedback:record).
	Feedback *FeedbackRecorder
	// Feeds polls the topics file's feeds (feeds:poll).
	Feeds *FeedPoller
	// Webhooks deliver webhook events (webhook:deliver).
	Webhooks *WebhookSender
	// Metrics are written by the middleware for every task.
	Metrics *Metrics
}

// New builds a worker on rdb (not closed by the worker).
func New(rdb redis.UniversalClient, cfg Config, h Handlers) *Worker {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	retryDelay := cfg.RetryDelay
	if retryDelay == nil {
		retryDelay = cfg.Retry.Delay
	}
	if h.Webhooks != nil {
		// The webhook lane retries on its own schedule (a day, the
		// endpoint's Retry-After), not the mail's.
		mailDelay := retryDelay
		retryDelay = func(n int, err error, t *asynq.Task) time.Duration {
			if t.Type() == tasks.TypeWebhook {
				return h.Webhooks.RetryDelay(n, err, t)
			}
			return mailDelay(n, err, t)
		}
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:     cfg.Concurrency,
		Queues:          tasks.QueueWeights,
		ShutdownTimeout: cfg.ShutdownTimeout,
		RetryDelayFunc:  retryDelay,
		IsFailure:       IsFailure,
		Logger:          asynqLogger{log.With("component", "asynq")},
		LogLevel:        asynq.WarnLevel,

		GroupAggregator:  Aggregator(log),
		GroupGracePeriod: cfg.GroupGrace,
		GroupMaxDelay:    cfg.GroupMaxDelay,
		GroupMaxSize:     cfg.GroupMaxSize,

		DelayedTaskCheckInterval: cfg.PollInterval,
		TaskCheckInterval:        min(cfg.PollInterval, time.Second),
	})
	mux := asynq.NewServeMux()
	mux.Use(Observe(log, h.Metrics))
	mux.HandleFunc(tasks.TypeConfirmEmail, h.Mails.HandleConfirm)
	mux.HandleFunc(tasks.TypeWelcomeEmail, h.Sequence.HandleWelcome)
	mux.HandleFunc(tasks.TypeSequenceStep, h.Sequence.HandleStep)
	mux.HandleFunc(tasks.TypeUnsubscribeEmail, h.Mails.HandleUnsubscribeLink)
	mux.HandleFunc(tasks.TypeDigestPlan, h.Planner.HandleDigestPlan)
	mux.HandleFunc(tasks.TypeDigestEmail, h.Batches.HandleDigestBatch)
	if h.Issues != nil {
		mux.HandleFunc(tasks.TypeIssuePlan, h.Issues.HandleIssuePlan)
		mux.HandleFunc(tasks.TypeIssueEmail, h.Issues.HandleIssueBatch)
	}
	mux.HandleFunc(tasks.TypeEventsEmail, h.Events.HandleEventsEmail)
	mux.HandleFunc(tasks.TypeFeedback, h.Feedback.HandleFeedback)
	if h.Feeds != nil {
		mux.HandleFunc(tasks.TypeFeedsPoll, h.Feeds.HandleFeedsPoll)
	}
	if h.Webhooks != nil {
		mux.HandleFunc(tasks.TypeWebhook, h.Webhooks.HandleWebhook)
	}
	return &Worker{srv: srv, mux: mux, handlers: h}
}

// Start begins processing.
func (w *Worker) Start() error {
	if err := w.srv.Start(w.mux); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	return nil
}

// Stop stops taking new tasks; running ones finish (SIGTSTP).
func (w *Worker) Stop() { w.srv.Stop() }

// Shutdown waits up to the shutdown timeout for running tasks, then
// requeues what is left (it runs again elsewhere, guarded by its mark).
func (w *Worker) Shutdown() {
	w.srv.Shutdown()
	w.handlers.Close()
}

// asynqLogger sends asynq's own log lines to slog.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...)) }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...)) }
func (a asynqLogger) Fatal(args ...any) { a.l.Error(fmt.Sprint(args...)) }
