package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/newsletter/newsletter/store"
)

// webhooks are the outgoing webhook endpoints, in creation order.
type webhooks struct {
	list []*store.Webhook
}

func (w *webhooks) find(id string) (int, *store.Webhook) {
	for i, e := range w.list {
		if e.ID == id {
			return i, e
		}
	}
	return -1, nil
}

func copyWebhook(w *store.Webhook) store.Webhook {
	c := *w
	c.Events = slices.Clone(w.Events)
	return c
}

// AddWebhook implements store.Webhooks.
func (m *Memory) AddWebhook(_ context.Context, w store.Webhook) (store.Webhook, error) {
	if err := w.Check(); err != nil {
		return store.Webhook{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, e := m.hooks.find(w.ID); e != nil {
		return store.Webhook{}, store.ErrWebhookExists
	}
	if len(m.hooks.list) >= store.MaxWebhooks {
		return store.Webhook{}, store.ErrTooManyWebhooks
	}
	w.Events = slices.Clone(w.Events)
	w.State, w.Failures, w.FailingSince, w.DisabledAt = store.WebhookActive, 0, time.Time{}, time.Time{}
	w.CreatedAt = m.now().UTC().Truncate(time.Millisecond)
	m.hooks.list = append(m.hooks.list, &w)
	return copyWebhook(&w), nil
}

// ListWebhooks implements store.Webhooks.
func (m *Memory) ListWebhooks(context.Context) ([]store.Webhook, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]store.Webhook, 0, len(m.hooks.list))
	for _, e := range m.hooks.list {
		out = append(out, copyWebhook(e))
	}
	return out, nil
}

// GetWebhook implements store.Webhooks.
func (m *Memory) GetWebhook(_ context.Context, id string) (store.Webhook, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, e := m.hooks.find(id); e != nil {
		return copyWebhook(e), nil
	}
	return store.Webhook{}, store.ErrWebhookNotFound
}

// DeleteWebhook implements store.Webhooks.
func (m *Memory) DeleteWebhook(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, e := m.hooks.find(id)
	if e == nil {
		return store.ErrWebhookNotFound
	}
	m.hooks.list = slices.Delete(m.hooks.list, i, i+1)
	return nil
}

// change applies fn to endpoint id under the lock and answers it.
func (m *Memory) changeWebhook(id string, fn func(e *store.Webhook, now time.Time)) (store.Webhook, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, e := m.hooks.find(id)
	if e == nil {
		return store.Webhook{}, store.ErrWebhookNotFound
	}
	fn(e, m.now().UTC().Truncate(time.Millisecond))
	return copyWebhook(e), nil
}

// WebhookDelivered implements store.Webhooks.
func (m *Memory) WebhookDelivered(_ context.Context, id string) error {
	_, err := m.changeWebhook(id, func(e *store.Webhook, _ time.Time) {
		e.Failures, e.FailingSince = 0, time.Time{}
	})
	return err
}

// WebhookFailed implements store.Webhooks.
func (m *Memory) WebhookFailed(_ context.Context, id string, p store.WebhookPolicy) (store.Webhook, error) {
	return m.changeWebhook(id, func(e *store.Webhook, now time.Time) {
		if e.State != store.WebhookActive {
			return
		}
		e.Failures++
		if e.FailingSince.IsZero() {
			e.FailingSince = now
		}
		if p.Disables(e.Failures, e.FailingSince, now) {
			e.State, e.DisabledAt = store.WebhookDisabled, now
		}
	})
}

// DisableWebhook implements store.Webhooks.
func (m *Memory) DisableWebhook(_ context.Context, id string) (store.Webhook, error) {
	return m.changeWebhook(id, func(e *store.Webhook, now time.Time) {
		if e.State != store.WebhookDisabled {
			e.State, e.DisabledAt = store.WebhookDisabled, now
		}
	})
}

// EnableWebhook implements store.Webhooks.
func (m *Memory) EnableWebhook(_ context.Context, id string) (store.Webhook, error) {
	return m.changeWebhook(id, func(e *store.Webhook, _ time.Time) {
		e.State, e.Failures, e.FailingSince, e.DisabledAt = store.WebhookActive, 0, time.Time{}, time.Time{}
	})
}
