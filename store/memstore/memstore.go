// Package memstore is the store kept in process memory, for handler unit
// tests. It follows the same contract as the Redis store (storetest runs the
// same suite on both) but keeps nothing, and expires claims only when asked
// at a later time (SetClock).
package memstore

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

// Memory is a store.Store in process memory.
type Memory struct {
	mu      sync.Mutex
	now     func() time.Time
	topics  *topics.Set
	seq     int64
	byEmail map[string]*store.Subscriber
	outbox  map[string]store.OutboxEntry
	sent    map[store.Mark]bool
	claims  map[store.Mark]claim
	byID    map[int64]*store.Subscriber
	// holds are the times of the mails counted against each allowance
	// (kind and mailbox) in the last day (ConfirmHold).
	holds map[string][]time.Time
	// reconfirms are the confirmations asked for suppressed subscribers
	// (store.ReconfirmWindow).
	reconfirms map[int64]*reconfirm
	// tokens are the stored tokens by their hash.
	tokens map[string]adminauth.StoredToken
	// auditLog is the audit log, oldest first.
	auditLog []audit.Entry
	// soft are the soft-bounce report times of each subscriber; seen the
	// reports already applied (Feedback).
	soft map[int64][]time.Time
	seen map[string]bool
	// push are each subscriber's browsers for web push, oldest first.
	push map[int64][]store.PushSubscription
	// hooks are the outgoing webhook endpoints.
	hooks webhooks

	items    []store.Item
	runs     map[string]*store.DigestRun
	outcomes map[string]map[int64]bool // period:outcome -> ids
	lastItem int64
	latest   string

	issues   map[int64]*issueRec
	slugs    map[string]int64
	issueSeq int64
	feeds    map[[2]string]*memFeed
	archGen  int64

	people people
}

// New returns an empty Memory store.
func New() *Memory {
	return &Memory{
		now:     time.Now,
		topics:  topics.Default(0),
		byEmail: map[string]*store.Subscriber{},
		outbox:  map[string]store.OutboxEntry{},
		sent:    map[store.Mark]bool{},
		claims:  map[store.Mark]claim{},
		byID:    map[int64]*store.Subscriber{},
		holds:   map[string][]time.Time{},
		soft:    map[int64][]time.Time{},
		seen:    map[string]bool{},
		push:    map[int64][]store.PushSubscription{},
		issues:  map[int64]*issueRec{},
		slugs:   map[string]int64{},
		runs:    map[string]*store.DigestRun{},
		feeds:   map[[2]string]*memFeed{},

		outcomes:   map[string]map[int64]bool{},
		reconfirms: map[int64]*reconfirm{},
		people:     newPeople(),
	}
}

// UseTopics makes the store read and write the topics of s.
func (m *Memory) UseTopics(s *topics.Set) { m.mu.Lock(); m.topics = s; m.mu.Unlock() }

// copyOf is the subscriber as a caller gets it: its own copy.
func copyOf(s *store.Subscriber) store.Subscriber {
	c := *s
	c.Topics = slices.Clone(s.Topics)
	if c.Topics == nil {
		c.Topics = []string{}
	}
	return c
}

// SetClock makes the store read time from now.
func (m *Memory) SetClock(now func() time.Time) { m.mu.Lock(); m.now = now; m.mu.Unlock() }

// reconfirm is a confirmation asked for a suppressed subscriber: what the
// signup chose, applied by the confirmation. A cancelled one (the address
// left or bounced again) still holds the window.
type reconfirm struct {
	until     time.Time
	cancelled bool
	name, tz  string
	topics    []string
	consent   store.Consent
}

// reconfirming tells whether s is suppressed with a live confirmation
// asked for.
func (m *Memory) reconfirming(s *store.Subscriber, now time.Time) bool {
	rc := m.reconfirms[s.ID]
	return s.Status.Suppressed() && rc != nil && !rc.cancelled && now.Before(rc.until)
}

// cancelReconfirm voids the confirmation asked for id, keeping its window.
func (m *Memory) cancelReconfirm(id int64) {
	if rc := m.reconfirms[id]; rc != nil {
		rc.cancelled = true
	}
}

// view is s as Get and Subscribe answer it.
func (m *Memory) view(s *store.Subscriber, now time.Time) store.Subscriber {
	c := copyOf(s)
	c.Reconfirming = m.reconfirming(s, now)
	return c
}

// takeHold counts one mail against the allowance key (kind and mailbox).
func (m *Memory) takeHold(key string, h store.ConfirmHold, now time.Time) bool {
	if h.Every <= 0 {
		return true
	}
	var day []time.Time
	for _, at := range m.holds[key] {
		if now.Sub(at) < 24*time.Hour {
			day = append(day, at)
		}
	}
	m.holds[key] = day
	if len(day) > 0 && now.Sub(day[len(day)-1]) < h.Every || h.PerDay > 0 && len(day) >= h.PerDay {
		return false
	}
	m.holds[key] = append(day, now)
	return true
}

func holdKey(kind, email string) string { return kind + ":" + address.Mailbox(email) }

// Subscribe implements store.Subscribers.
func (m *Memory) Subscribe(_ context.Context, req store.SubscribeRequest) (store.Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now().UTC().Truncate(time.Millisecond)
	confirm := !req.Activate && req.Outbox.ID != ""
	s, ok := m.byEmail[req.Email]
	if ok && req.OnlyNew {
		return m.view(s, now), store.ErrExists
	}
	if !ok && req.OnlyNew && m.people.erased[req.Email] {
		return store.Subscriber{}, store.ErrErased
	}
	if ok && s.Status == store.Active {
		return m.view(s, now), store.ErrAlreadyActive
	}
	suppressed := ok && s.Status.Suppressed()
	if suppressed && !confirm {
		return m.view(s, now), store.ErrSuppressed
	}
	if suppressed {
		if rc := m.reconfirms[s.ID]; rc != nil && now.Before(rc.until) {
			return m.view(s, now), store.ErrConfirmHeld
		}
	}
	if confirm && !m.takeHold(holdKey(store.HoldConfirm, req.Email), req.Hold, now) {
		if !ok {
			return store.Subscriber{}, store.ErrConfirmHeld
		}
		return m.view(s, now), store.ErrConfirmHeld
	}
	if req.Outbox.ID != "" {
		m.outbox[req.Outbox.ID] = req.Outbox
	}
	if suppressed {
		topics := slices.Clone(req.Topics)
		if req.Topics == nil {
			topics = m.topics.Defaults()
		}
		m.reconfirms[s.ID] = &reconfirm{until: now.Add(store.ReconfirmWindow), name: req.Name, tz: req.Timezone, topics: topics,
			consent: store.Consent{Source: req.Source, RequestedAt: now}}
		m.count("signup")
		return m.view(s, now), nil
	}
	if !ok {
		m.seq++
		s = &store.Subscriber{ID: m.seq, Email: req.Email, CreatedAt: now}
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
	s.Topics = slices.Clone(req.Topics)
	if req.Topics == nil {
		s.Topics = m.topics.Defaults()
	}
	s.Status = store.Pending
	m.setConsent(s.ID, req.Source, now)
	if req.Source == store.SourceImport {
		m.count("import")
	} else {
		m.count("signup")
	}
	if req.Activate {
		s.Status, s.ConfirmedAt = store.Active, now
		if !req.OnlyNew {
			m.count("confirm")
			delete(m.people.erased, req.Email)
		}
	}
	return m.view(s, now), nil
}

// Confirm implements store.Subscribers.
func (m *Memory) Confirm(_ context.Context, email string, welcome store.OutboxEntry) (store.Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now().UTC().Truncate(time.Millisecond)
	s, ok := m.byEmail[email]
	switch {
	case !ok:
		return store.Subscriber{}, store.ErrNotFound
	case s.Status == store.Active:
		return copyOf(s), store.ErrAlreadyActive
	case m.reconfirming(s, now):
		// The person's own confirmation lifts the suppression, with what
		// their signup chose.
		rc := m.reconfirms[s.ID]
		delete(m.reconfirms, s.ID)
		delete(m.soft, s.ID)
		if rc.name != "" {
			s.Name = rc.name
		}
		if rc.tz != "" {
			s.Timezone = rc.tz
		}
		s.Topics = slices.DeleteFunc(m.topics.IDs(), func(t string) bool { return !slices.Contains(rc.topics, t) })
		s.UnsubscribedAt = time.Time{}
		m.setConsent(s.ID, rc.consent.Source, rc.consent.RequestedAt)
	case s.Status != store.Pending:
		return copyOf(s), store.ErrNotPending
	}
	s.Status, s.ConfirmedAt = store.Active, now
	m.count("confirm")
	delete(m.people.erased, email)
	if welcome.ID != "" {
		m.outbox[welcome.ID] = welcome
	}
	return copyOf(s), nil
}

// Unsubscribe implements store.Subscribers.
func (m *Memory) Unsubscribe(_ context.Context, email string, cancel ...string) (store.Subscriber, error) {
	return m.end(email, store.Unsubscribed, cancel)
}

// MarkBounced implements store.Subscribers.
func (m *Memory) MarkBounced(_ context.Context, email string) error {
	_, err := m.end(email, store.Bounced, nil)
	return err
}

func (m *Memory) end(email string, to store.Status, cancel []string) (store.Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byEmail[email]
	if !ok {
		return store.Subscriber{}, store.ErrNotFound
	}
	m.cancelReconfirm(s.ID)
	if s.Status != store.Complained && (to == store.Bounced || (s.Status != store.Unsubscribed && s.Status != store.Bounced)) {
		if s.Status != to {
			m.count(map[store.Status]string{store.Bounced: "bounce", store.Unsubscribed: "unsubscribe"}[to])
		}
		s.Status, s.UnsubscribedAt = to, m.now().UTC().Truncate(time.Millisecond)
	}
	s.Topics = nil
	if to == store.Unsubscribed {
		delete(m.push, s.ID)
	}
	for _, id := range cancel {
		delete(m.outbox, id)
	}
	return copyOf(s), nil
}

// SetPreferences implements store.Subscribers.
func (m *Memory) SetPreferences(_ context.Context, email string, p store.Preferences, cancel store.Cancel) (store.Subscriber, error) {
	return m.changeTopics(email, func(s *store.Subscriber) []string {
		s.Name, s.Timezone = p.Name, p.Timezone
		return slices.Clone(p.Topics)
	}, cancel)
}

// LeaveTopic implements store.Subscribers.
func (m *Memory) LeaveTopic(_ context.Context, email, topic string, cancel store.Cancel) (store.Subscriber, error) {
	return m.changeTopics(email, func(s *store.Subscriber) []string {
		return slices.DeleteFunc(slices.Clone(s.Topics), func(t string) bool { return t == topic })
	}, cancel)
}

func (m *Memory) changeTopics(email string, change func(*store.Subscriber) []string, cancel store.Cancel) (store.Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byEmail[email]
	if !ok {
		return store.Subscriber{}, store.ErrNotFound
	}
	if s.Status != store.Active {
		return copyOf(s), store.ErrNotActive
	}
	// In the topics file's order, as the Redis store answers.
	chosen := change(s)
	s.Topics = slices.DeleteFunc(m.topics.IDs(), func(t string) bool { return !slices.Contains(chosen, t) })
	if len(s.Topics) == 0 {
		s.Status, s.UnsubscribedAt = store.Unsubscribed, m.now().UTC().Truncate(time.Millisecond)
		m.count("unsubscribe")
		delete(m.push, s.ID)
	}
	if !slices.Contains(s.Topics, cancel.Topic) {
		for _, id := range cancel.Outbox {
			delete(m.outbox, id)
		}
	}
	return copyOf(s), nil
}

// Get implements store.Subscribers.
func (m *Memory) Get(_ context.Context, email string) (store.Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.byEmail[email]; ok {
		return m.view(s, m.now()), nil
	}
	return store.Subscriber{}, store.ErrNotFound
}

// GetByID implements store.Subscribers.
func (m *Memory) GetByID(_ context.Context, id int64) (store.Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.byID[id]; ok {
		return m.view(s, m.now()), nil
	}
	return store.Subscriber{}, store.ErrNotFound
}

// OutboxDone implements store.Outbox.
func (m *Memory) OutboxDone(_ context.Context, ids ...string) error {
	m.mu.Lock()
	for _, id := range ids {
		delete(m.outbox, id)
	}
	m.mu.Unlock()
	return nil
}

// OutboxDue implements store.Outbox.
func (m *Memory) OutboxDue(_ context.Context, before time.Time, limit int) ([]store.OutboxEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.OutboxEntry
	for _, e := range m.outbox {
		if !e.Due.After(before) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b store.OutboxEntry) int { return a.Due.Compare(b.Due) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// claim is a held delivery mark: until when, and by which task.
type claim struct {
	expires time.Time
	owner   string
}

// ClaimMarks implements store.Marks.
func (m *Memory) ClaimMarks(_ context.Context, owner string, marks []store.Mark, ttl time.Duration) ([]store.Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]store.Claim, len(marks))
	for i, mk := range marks {
		switch c, held := m.claims[mk]; {
		case m.sent[mk]:
			out[i] = store.AlreadySent
		case held && m.now().Before(c.expires) && (owner == "" || c.owner != owner):
			out[i] = store.Busy
		default:
			m.claims[mk] = claim{expires: m.now().Add(ttl), owner: owner}
			out[i] = store.Claimed
		}
	}
	return out, nil
}

// MarkSent implements store.Marks.
func (m *Memory) MarkSent(_ context.Context, marks ...store.Mark) error {
	m.mu.Lock()
	now := m.now().UTC().Truncate(time.Millisecond)
	for _, mk := range marks {
		m.sent[mk] = true
		delete(m.claims, mk)
		if !mk.Shared {
			m.people.sentAt[mk] = now
		}
	}
	m.mu.Unlock()
	return nil
}

// ReleaseMarks implements store.Marks.
func (m *Memory) ReleaseMarks(_ context.Context, marks []store.Mark) error {
	m.mu.Lock()
	for _, mk := range marks {
		delete(m.claims, mk)
	}
	m.mu.Unlock()
	return nil
}

// SentMarks implements store.Marks.
func (m *Memory) SentMarks(_ context.Context, marks []store.Mark) ([]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]bool, len(marks))
	for i, mk := range marks {
		out[i] = m.sent[mk]
	}
	return out, nil
}

// Ping implements store.Subscribers.
func (m *Memory) Ping(context.Context) error { return nil }

var _ store.Store = (*Memory)(nil)

// TakeHold implements store.MailHolds.
func (m *Memory) TakeHold(_ context.Context, kind, email string, h store.ConfirmHold) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.takeHold(holdKey(kind, email), h, m.now()), nil
}

// GiveBackHold implements store.MailHolds.
func (m *Memory) GiveBackHold(_ context.Context, kind, email string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := holdKey(kind, email)
	if day := m.holds[key]; len(day) > 0 {
		m.holds[key] = day[:len(day)-1]
	}
	if s, ok := m.byEmail[email]; ok && kind == store.HoldConfirm && s.Status.Suppressed() {
		delete(m.reconfirms, s.ID)
	}
	return nil
}
