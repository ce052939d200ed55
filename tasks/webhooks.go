package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/store"
)

// WebhookPayload is the payload of TypeWebhook: one event for one
// endpoint. The endpoint's URL and secret are read when the task runs (a
// secret has no business in the queue, and an endpoint removed or
// disabled since gets nothing).
type WebhookPayload struct {
	Endpoint string `json:"endpoint"`
	ID       string `json:"id"` // the webhook-id
	Type     string `json:"type"`
	// Queued starts the retry window (WebhookBackoff.Window).
	Queued time.Time `json:"queued"`
	// Body is the signed JSON, kept as a string so every attempt sends
	// the very same bytes.
	Body string `json:"body"`
	// Test marks a sample event an admin asked for: tried once, its
	// outcome only logged (the endpoint's failures are not counted).
	Test bool `json:"test,omitempty"`
}

// NewWebhookTest is the delivery of a test event to endpoint, queued now.
func NewWebhookTest(endpoint string, now time.Time) (*asynq.Task, WebhookPayload, error) {
	ev := WebhookTestEvent(endpoint, now)
	body, err := ev.Body()
	if err != nil {
		return nil, WebhookPayload{}, err
	}
	p := WebhookPayload{Endpoint: endpoint, ID: ev.ID, Type: ev.Type, Queued: now.UTC(), Body: string(body), Test: true}
	return NewWebhook(p), p, nil
}

// WebhookTaskID is the task of event id for endpoint: an event is queued
// once per endpoint, however often it is reported while its task exists.
func WebhookTaskID(endpoint, id string) string { return "webhook:" + endpoint + ":" + id }

// webhookTimeout is the task's budget: the endpoint's timeout (15 s,
// channels/webhook.DefaultTimeout, which worker's tests hold below this
// budget) and the store's round trips around it.
const webhookTimeout = 30 * time.Second

// NewWebhook is the delivery of p (Webhook).
func NewWebhook(p WebhookPayload) *asynq.Task { return Webhook.New(p) }

// WebhookEndpoints lists the endpoints (store.Webhooks).
type WebhookEndpoints interface {
	ListWebhooks(ctx context.Context) ([]store.Webhook, error)
}

// DefaultWebhookCacheTTL is how long a process trusts its list of
// endpoints: an event that no endpoint wants costs no Redis round trip,
// and a new endpoint gets events within this time on every process (at
// once on the one that registered it).
const DefaultWebhookCacheTTL = 5 * time.Second

// WebhookNotifier queues an event for each active endpoint that wants its
// type. A nil *WebhookNotifier queues nothing.
type WebhookNotifier struct {
	Endpoints WebhookEndpoints
	Queue     Enqueuer
	TTL       time.Duration    // DefaultWebhookCacheTTL
	Now       func() time.Time // nil: time.Now
	Log       *slog.Logger

	mu     sync.Mutex
	cached []store.Webhook
	loaded time.Time // zero: nothing cached
}

// Forget drops the cached endpoints: the next event reads them again (the
// API calls it after an endpoint was added, removed or enabled).
func (n *WebhookNotifier) Forget() {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.loaded = time.Time{}
	n.mu.Unlock()
}

func (n *WebhookNotifier) now() time.Time {
	if n.Now != nil {
		return n.Now()
	}
	return time.Now()
}

// endpoints is the list, from the cache while it is fresh. When Redis
// fails, a stale list is better than none.
func (n *WebhookNotifier) endpoints(ctx context.Context) ([]store.Webhook, error) {
	ttl := n.TTL
	if ttl <= 0 {
		ttl = DefaultWebhookCacheTTL
	}
	now := n.now()
	n.mu.Lock()
	cached, loaded := n.cached, n.loaded
	n.mu.Unlock()
	if !loaded.IsZero() && now.Sub(loaded) < ttl {
		return cached, nil
	}
	// Read outside the lock: a hung Redis holds this caller only, to its
	// own deadline.
	list, err := n.Endpoints.ListWebhooks(ctx)
	if err != nil {
		if !loaded.IsZero() {
			n.log().Warn("webhooks: endpoints not read, using the last list", "err", err)
			return cached, nil
		}
		return nil, err
	}
	n.mu.Lock()
	n.cached, n.loaded = list, now
	n.mu.Unlock()
	return list, nil
}

// Notify queues ev for each active endpoint that asked for its type. No
// such endpoint: nothing is built or queued.
func (n *WebhookNotifier) Notify(ctx context.Context, ev WebhookEvent) error {
	if n == nil {
		return nil
	}
	list, err := n.endpoints(ctx)
	if err != nil {
		return fmt.Errorf("webhooks: %s: %w", ev.Type, err)
	}
	var body []byte
	var errs []error
	for _, ep := range list {
		if !ep.Wants(ev.Type) {
			continue
		}
		if body == nil {
			if body, err = ev.Body(); err != nil {
				return err
			}
		}
		t := NewWebhook(WebhookPayload{Endpoint: ep.ID, ID: ev.ID, Type: ev.Type, Queued: n.now().UTC(), Body: string(body)})
		if _, err := n.Queue.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
			errs = append(errs, fmt.Errorf("webhooks: queue %s for %s: %w", ev.Type, ep.ID, err))
		}
	}
	return errors.Join(errs...)
}

// NotifyLogged is Notify for a change that already happened: a failure to
// queue cannot undo it, so it is logged (at error: the event is lost to
// the endpoints).
func (n *WebhookNotifier) NotifyLogged(ctx context.Context, ev WebhookEvent) {
	if err := n.Notify(ctx, ev); err != nil {
		n.log().Error("webhooks: event not queued", "type", ev.Type, "event", ev.ID, "err", err)
	}
}

func (n *WebhookNotifier) log() *slog.Logger {
	if n != nil && n.Log != nil {
		return n.Log
	}
	return slog.Default()
}
