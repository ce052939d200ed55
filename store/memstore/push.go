package memstore

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/newsletter/newsletter/store"
)

// AddPushSubscription implements store.PushSubscriptions.
func (m *Memory) AddPushSubscription(_ context.Context, id int64, p store.PushSubscription) error {
	if p.Endpoint == "" {
		return errors.New("push subscription: no endpoint")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byID[id]
	if !ok {
		return store.ErrNotFound
	}
	if s.Status != store.Active {
		return store.ErrNotActive
	}
	p.P256DH, p.Auth = slices.Clone(p.P256DH), slices.Clone(p.Auth)
	p.CreatedAt = m.now().UTC().Truncate(time.Millisecond)
	// Oldest first; a renewed browser moves to the end.
	list := slices.DeleteFunc(m.push[id], func(q store.PushSubscription) bool { return q.Endpoint == p.Endpoint })
	list = append(list, p)
	if over := len(list) - store.MaxPushSubscriptions; over > 0 {
		list = slices.Delete(list, 0, over)
	}
	m.push[id] = list
	return nil
}

// PushSubscriptions implements store.PushSubscriptions.
func (m *Memory) PushSubscriptions(_ context.Context, id int64) ([]store.PushSubscription, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pushOf(id), nil
}

// PushSubscriptionsOf implements store.PushSubscriptions.
func (m *Memory) PushSubscriptionsOf(_ context.Context, ids []int64) ([][]store.PushSubscription, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([][]store.PushSubscription, len(ids))
	for i, id := range ids {
		out[i] = m.pushOf(id)
	}
	return out, nil
}

// HavePushSubscriptions implements store.PushSubscriptions.
func (m *Memory) HavePushSubscriptions(_ context.Context, ids []int64) ([]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]bool, len(ids))
	for i, id := range ids {
		out[i] = len(m.push[id]) > 0
	}
	return out, nil
}

// pushOf is a copy of id's browsers; m.mu is held.
func (m *Memory) pushOf(id int64) []store.PushSubscription {
	var out []store.PushSubscription
	for _, p := range m.push[id] {
		p.P256DH, p.Auth = slices.Clone(p.P256DH), slices.Clone(p.Auth)
		out = append(out, p)
	}
	return out
}

// DeletePushSubscription implements store.PushSubscriptions.
func (m *Memory) DeletePushSubscription(_ context.Context, id int64, endpoint string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.push[id] = slices.DeleteFunc(m.push[id], func(q store.PushSubscription) bool { return q.Endpoint == endpoint })
	return nil
}

// DeletePushSubscriptions implements store.PushSubscriptions.
func (m *Memory) DeletePushSubscriptions(_ context.Context, id int64) error {
	m.mu.Lock()
	delete(m.push, id)
	m.mu.Unlock()
	return nil
}
