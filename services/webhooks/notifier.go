package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// The notifier: the one place an event becomes a task per endpoint that
// wants it. It reads the endpoints from the store and queues tasks, so it
// is a service; the event vocabulary and the task are the tasks package's.

// Endpoints lists the endpoints (store.Webhooks).
type Endpoints interface {
	ListWebhooks(ctx context.Context) ([]store.Webhook, error)
}

// DefaultCacheTTL is how long a process trusts its list of
// endpoints: an event that no endpoint wants costs no Redis round trip,
// and a new endpoint gets events within this time on every process (at
// once on the one that registered it).
const DefaultCacheTTL = 5 * time.Second

// Notifier queues an event for each active endpoint that wants its
// type. A nil *Notifier queues nothing.
type Notifier struct {
	Endpoints Endpoints
	Queue     tasks.Enqueuer
	TTL       time.Duration    // DefaultCacheTTL
	Now       func() time.Time // nil: time.Now
	Log       *slog.Logger

	mu     sync.Mutex
	cached []store.Webhook
	loaded time.Time // zero: nothing cached
}

// Forget drops the cached endpoints: the next event reads them again (the
// API calls it after an endpoint was added, removed or enabled).
func (n *Notifier) Forget() {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.loaded = time.Time{}
	n.mu.Unlock()
}

func (n *Notifier) now() time.Time {
	if n.Now != nil {
		return n.Now()
	}
	return time.Now()
}

// endpoints is the list, from the cache while it is fresh. When Redis
// fails, a stale list is better than none.
func (n *Notifier) endpoints(ctx context.Context) ([]store.Webhook, error) {
	ttl := n.TTL
	if ttl <= 0 {
		ttl = DefaultCacheTTL
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
func (n *Notifier) Notify(ctx context.Context, ev tasks.WebhookEvent) error {
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
		t := tasks.NewWebhook(tasks.WebhookPayload{Endpoint: ep.ID, ID: ev.ID, Type: ev.Type, Queued: n.now().UTC(), Body: string(body)})
		if _, err := n.Queue.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
			errs = append(errs, fmt.Errorf("webhooks: queue %s for %s: %w", ev.Type, ep.ID, err))
		}
	}
	return errors.Join(errs...)
}

// NotifyLogged is Notify for a change that already happened: a failure to
// queue cannot undo it, so it is logged (at error: the event is lost to
// the endpoints).
func (n *Notifier) NotifyLogged(ctx context.Context, ev tasks.WebhookEvent) {
	if err := n.Notify(ctx, ev); err != nil {
		n.log().Error("webhooks: event not queued", "type", ev.Type, "event", ev.ID, "err", err)
	}
}

func (n *Notifier) log() *slog.Logger {
	if n != nil && n.Log != nil {
		return n.Log
	}
	return slog.Default()
}
