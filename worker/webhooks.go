package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/webhook"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// ErrNotificationDead is wrapped (with asynq.SkipRetry) by a notification
// that will not be tried again: its endpoint is disabled, answered 410
// Gone, or failed for the whole retry window. asynq archives it: a dead
// letter, which an operator re-runs in asynqmon once the endpoint works.
var ErrNotificationDead = errors.New("notification given up")

// WebhookPoster delivers one message to one endpoint (*webhook.Sender),
// answering the endpoint's status code (0: no answer). It is the
// channel's Poster: the handler classifies its answers as
// webhook.Channel does.
type WebhookPoster = webhook.Poster

// WebhookSender handles TypeWebhook: read the endpoint, post the event,
// and keep the endpoint's count of failures in a row, which disables it
// (store.WebhookPolicy).
type WebhookSender struct {
	Store   store.Webhooks
	Post    WebhookPoster
	Policy  store.WebhookPolicy
	Backoff tasks.WebhookBackoff
	Metrics *Metrics
	Log     *slog.Logger
	Now     func() time.Time
}

// HandleWebhook handles TypeWebhook.
func (h *WebhookSender) HandleWebhook(ctx context.Context, p tasks.WebhookPayload) error {
	log := h.Log.With("endpoint", p.Endpoint, "event", p.ID, "type", p.Type)
	ep, err := h.Store.GetWebhook(ctx, p.Endpoint)
	if errors.Is(err, store.ErrWebhookNotFound) {
		log.Info("webhook: the endpoint was removed; event dropped")
		h.count("dropped")
		return nil
	}
	if err != nil {
		return fmt.Errorf("webhook: load endpoint: %w", err)
	}
	if ep.State != store.WebhookActive {
		h.count("dead")
		return fmt.Errorf("webhook: endpoint %s is disabled: %w: %w", ep.ID, ErrNotificationDead, asynq.SkipRetry)
	}
	status, err := h.Post.Post(ctx, ep.URL, ep.Secret, webhook.Message{ID: p.ID, Body: []byte(p.Body)})
	h.logDelivery(ctx, log, p, status, err)
	// The delivery is decided by the channel's Verdict; the poster is
	// called here rather than through webhook.Channel.Send because the
	// endpoint's log of deliveries keeps the status code, which an
	// Outcome does not carry.
	out := webhook.Classify(err)
	if p.Test {
		// An admin's check: the log shows the outcome; a failure neither
		// counts against the endpoint nor is retried.
		if err != nil {
			return fmt.Errorf("webhook: test event: %w: %w", &deliveryFailure{msg: err.Error(), wait: out.After}, asynq.SkipRetry)
		}
		return nil
	}
	switch out.Verdict {
	case channels.Sent:
		if err := h.Store.WebhookDelivered(ctx, ep.ID); err != nil && !errors.Is(err, store.ErrWebhookNotFound) {
			// Delivered; a count not reset only brings a disabling
			// closer if the endpoint fails from now on.
			log.Warn("webhook: delivered, failures not reset", "err", err)
		}
		h.count("sent")
		return nil
	case channels.Drop:
		h.count("dead")
		return fmt.Errorf("webhook: endpoint %s: %w: %w: %w", ep.ID, err, ErrNotificationDead, asynq.SkipRetry)
	case channels.Retire:
		return h.retire(ctx, log, ep, err)
	}
	return h.failed(ctx, log, p, ep, out)
}

// retire disables an endpoint that answered 410 Gone and gives its event
// up.
func (h *WebhookSender) retire(ctx context.Context, log *slog.Logger, ep store.Webhook, err error) error {
	if _, derr := h.Store.DisableWebhook(ctx, ep.ID); derr != nil && !errors.Is(derr, store.ErrWebhookNotFound) {
		return fmt.Errorf("webhook: %w; disable the endpoint: %w", err, derr) // retried: it answers 410 again
	}
	log.Error("webhook: the endpoint answered 410 Gone and is disabled; enable it to resume", "url_host", hostOf(ep.URL))
	h.disabled()
	h.count("dead")
	return fmt.Errorf("webhook: %w: %w: %w", err, ErrNotificationDead, asynq.SkipRetry)
}

// failed counts a failure to retry against the endpoint, which disables
// it when it keeps failing, and gives the event up past the retry window.
func (h *WebhookSender) failed(ctx context.Context, log *slog.Logger, p tasks.WebhookPayload, ep store.Webhook, out channels.Outcome) error {
	err := error(&deliveryFailure{msg: out.Err.Error(), wait: out.After})
	after, ferr := h.Store.WebhookFailed(ctx, ep.ID, h.Policy)
	if ferr != nil && !errors.Is(ferr, store.ErrWebhookNotFound) {
		log.Warn("webhook: failure not counted", "err", ferr)
	}
	if ferr == nil && after.State == store.WebhookDisabled {
		log.Error("webhook: the endpoint keeps failing and is disabled; enable it to resume",
			"failures", after.Failures, "failing_since", after.FailingSince, "url_host", hostOf(ep.URL), "err", err)
		h.disabled()
		h.count("dead")
		return fmt.Errorf("webhook: %w: endpoint disabled: %w: %w", err, ErrNotificationDead, asynq.SkipRetry)
	}
	if h.Backoff.Expired(p.Queued, h.Now()) {
		h.count("dead")
		return fmt.Errorf("webhook: %w: retried for %s: %w: %w", err, h.Backoff.Window, ErrNotificationDead, asynq.SkipRetry)
	}
	if lastTry(ctx) {
		h.count("dead")
	} else {
		h.count("retry")
	}
	return fmt.Errorf("webhook: %w", err)
}

// logDelivery keeps the attempt in the endpoint's log of deliveries. A
// log not written loses a line of history, not the event: it is logged.
func (h *WebhookSender) logDelivery(ctx context.Context, log *slog.Logger, p tasks.WebhookPayload, status int, err error) {
	d := store.WebhookDelivery{At: h.Now(), Event: p.ID, Type: p.Type, Test: p.Test, OK: err == nil, Status: status}
	if err != nil {
		d.Error = err.Error()
	}
	if lerr := h.Store.RecordWebhookDelivery(ctx, p.Endpoint, d); lerr != nil && !errors.Is(lerr, store.ErrWebhookNotFound) {
		log.Warn("webhook: delivery not logged", "err", lerr)
	}
}

// deliveryFailure is a failed delivery (a webhook post, a push) as the
// task returns it: the text of what went wrong and the wait the endpoint
// or push service asked for (Retry-After). It keeps no link to the network
// error underneath, which would read as "Redis is away" (not counted,
// retried in seconds): an endpoint that refuses connections, or a push
// service that times out, is a failure, retried on the lane's backoff.
type deliveryFailure struct {
	msg  string
	wait time.Duration
}

func (e *deliveryFailure) Error() string { return e.msg }

// RetryDelay is the asynq RetryDelayFunc of TypeWebhook: the backoff, and
// an endpoint's Retry-After.
func (h *WebhookSender) RetryDelay(n int, err error, _ *asynq.Task) time.Duration {
	if redisAway(err) {
		return DefaultRedisAwayRetry
	}
	var wait time.Duration
	var f *deliveryFailure
	if errors.As(err, &f) {
		wait = f.wait
	}
	return h.Backoff.Delay(n, wait)
}

// lastTry tells a failing run that asynq will not retry.
func lastTry(ctx context.Context) bool {
	retried, ok1 := asynq.GetRetryCount(ctx)
	maxRetry, ok2 := asynq.GetMaxRetry(ctx)
	return ok1 && ok2 && retried >= maxRetry
}

func (h *WebhookSender) count(result string) {
	h.Metrics.Notifications.WithLabelValues(LaneWebhook, result).Inc()
}

func (h *WebhookSender) disabled() {
	h.Metrics.WebhooksDisabled.Inc()
}

// hostOf is the host of an endpoint's URL, for logs: its path and query
// may hold a token of the receiver's.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
