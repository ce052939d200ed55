package store

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Memory is a Store kept in process memory, for handler unit tests. It
// follows the same contract as Redis (store_test.go checks both) but keeps
// nothing and expires claims only when asked at a later time.
type Memory struct {
	mu      sync.Mutex
	now     func() time.Time
	seq     int64
	byEmail map[string]*Subscriber
	outbox  map[string]OutboxEntry
	sent    map[Mark]bool
	claims  map[Mark]time.Time // expiry
	byID    map[int64]*Subscriber

	items    []Item
	runs     map[string]*DigestRun
	outcomes map[string]map[int64]bool // period:outcome -> ids
	lastItem int64
	latest   string
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory {
	return &Memory{
		now:     time.Now,
		byEmail: map[string]*Subscriber{},
		outbox:  map[string]OutboxEntry{},
		sent:    map[Mark]bool{},
		claims:  map[Mark]time.Time{},
		byID:    map[int64]*Subscriber{},
		runs:    map[string]*DigestRun{},

		outcomes: map[string]map[int64]bool{},
	}
}

// SetClock makes the store read time from now.
func (m *Memory) SetClock(now func() time.Time) { m.mu.Lock(); m.now = now; m.mu.Unlock() }

// Subscribe implements Store.
func (m *Memory) Subscribe(_ context.Context, req SubscribeRequest) (Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now().UTC().Truncate(time.Millisecond)
	s, ok := m.byEmail[req.Email]
	if ok && req.OnlyNew {
		return *s, ErrExists
	}
	if ok && s.Status == Active {
		return *s, ErrAlreadyActive
	}
	if !ok {
		m.seq++
		s = &Subscriber{ID: m.seq, Email: req.Email, CreatedAt: now}
		m.byEmail[req.Email] = s
		m.byID[s.ID] = s
	}
	s.ConfirmedAt, s.UnsubscribedAt = time.Time{}, time.Time{}
	if req.Name != "" {
		s.Name = req.Name
	}
	if req.Timezone != "" {
		s.Timezone = req.Timezone
	}
	s.Status = Pending
	if req.Activate {
		s.Status, s.ConfirmedAt = Active, now
	}
	if req.Outbox.ID != "" {
		m.outbox[req.Outbox.ID] = req.Outbox
	}
	return *s, nil
}

// Confirm implements Store.
func (m *Memory) Confirm(_ context.Context, email string, welcome OutboxEntry) (Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byEmail[email]
	switch {
	case !ok:
		return Subscriber{}, ErrNotFound
	case s.Status == Active:
		return *s, ErrAlreadyActive
	case s.Status != Pending:
		return *s, ErrNotPending
	}
	s.Status, s.ConfirmedAt = Active, m.now().UTC().Truncate(time.Millisecond)
	m.outbox[welcome.ID] = welcome
	return *s, nil
}

// Unsubscribe implements Store.
func (m *Memory) Unsubscribe(_ context.Context, email string, cancel ...string) (Subscriber, error) {
	return m.end(email, Unsubscribed, cancel)
}

// MarkBounced implements Store.
func (m *Memory) MarkBounced(_ context.Context, email string) error {
	_, err := m.end(email, Bounced, nil)
	return err
}

func (m *Memory) end(email string, to Status, cancel []string) (Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byEmail[email]
	if !ok {
		return Subscriber{}, ErrNotFound
	}
	if to == Bounced || (s.Status != Unsubscribed && s.Status != Bounced) {
		s.Status, s.UnsubscribedAt = to, m.now().UTC().Truncate(time.Millisecond)
	}
	for _, id := range cancel {
		delete(m.outbox, id)
	}
	return *s, nil
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, email string) (Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.byEmail[email]; ok {
		return *s, nil
	}
	return Subscriber{}, ErrNotFound
}

// OutboxDone implements Store.
func (m *Memory) OutboxDone(_ context.Context, ids ...string) error {
	m.mu.Lock()
	for _, id := range ids {
		delete(m.outbox, id)
	}
	m.mu.Unlock()
	return nil
}

// OutboxDue implements Store.
func (m *Memory) OutboxDue(_ context.Context, before time.Time, limit int) ([]OutboxEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []OutboxEntry
	for _, e := range m.outbox {
		if !e.Due.After(before) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b OutboxEntry) int { return a.Due.Compare(b.Due) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ClaimMark implements Store.
func (m *Memory) ClaimMark(_ context.Context, mk Mark, ttl time.Duration) (Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sent[mk] {
		return AlreadySent, nil
	}
	if exp, ok := m.claims[mk]; ok && m.now().Before(exp) {
		return Busy, nil
	}
	m.claims[mk] = m.now().Add(ttl)
	return Claimed, nil
}

// MarkSent implements Store.
func (m *Memory) MarkSent(_ context.Context, mk Mark) error {
	m.mu.Lock()
	m.sent[mk] = true
	delete(m.claims, mk)
	m.mu.Unlock()
	return nil
}

// ReleaseMark implements Store.
func (m *Memory) ReleaseMark(_ context.Context, mk Mark) error {
	m.mu.Lock()
	delete(m.claims, mk)
	m.mu.Unlock()
	return nil
}

// Ping implements Store.
func (m *Memory) Ping(context.Context) error { return nil }
