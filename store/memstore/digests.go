package memstore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

// AddItem implements store.Digests.
func (m *Memory) AddItem(_ context.Context, it store.Item) (store.Item, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it.ID, it.PublishedAt = int64(len(m.items)+1), m.now().UTC().Truncate(time.Millisecond)
	if it.Topic == "" {
		it.Topic = topics.Digest
	}
	m.items = append(m.items, it)
	return it, nil
}

// ItemsAfter implements store.Digests.
func (m *Memory) ItemsAfter(_ context.Context, topic string, after int64, limit int) ([]store.Item, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []store.Item{}
	for _, it := range m.items {
		if it.ID > after && it.Topic == topic && len(out) < limit {
			out = append(out, it)
		}
	}
	return out, nil
}

// StartDigestRun implements store.Digests.
func (m *Memory) StartDigestRun(ctx context.Context, period string) (store.DigestRun, bool, error) {
	m.mu.Lock()
	created := false
	if _, ok := m.runs[period]; !ok {
		run := &store.DigestRun{Period: period, State: store.RunPlanning, CreatedAt: m.now().UTC().Truncate(time.Millisecond), Items: []store.Item{}, AsIssue: true}
		for _, it := range m.items {
			if it.ID > m.lastItem && it.Topic == topics.Digest {
				run.Items = append(run.Items, it)
			}
		}
		if len(run.Items) == 0 {
			run.State = store.RunEmpty
		} else {
			m.lastItem = run.Items[len(run.Items)-1].ID
		}
		for _, s := range m.byID {
			if s.Status == store.Active && slices.Contains(s.Topics, topics.Digest) {
				run.Audience++
			}
		}
		m.runs[period], m.latest, created = run, period, true
	}
	m.mu.Unlock()
	run, err := m.DigestRun(ctx, period)
	return run, created, err
}

// DigestRun implements store.Digests.
func (m *Memory) DigestRun(_ context.Context, period string) (store.DigestRun, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[period]
	if !ok {
		return store.DigestRun{}, store.ErrNoRun
	}
	run := *r
	run.Items = slices.Clone(r.Items)
	for mk := range m.sent {
		if mk.Kind == store.DigestMarkKind && mk.Key == period {
			run.Sent++
		}
	}
	run.Skipped = int64(len(m.outcomes[period+":"+store.OutcomeSkipped]))
	run.Failed = int64(len(m.outcomes[period+":"+store.OutcomeFailed]))
	if is, ok := m.issues[run.Issue]; ok {
		run = run.WithIssue(m.progressLocked(is))
	}
	return run.WithRates(), nil
}

// LatestDigestPeriod implements store.Digests.
func (m *Memory) LatestDigestPeriod(context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.latest, nil
}

// AdvanceDigestRun implements store.Digests.
func (m *Memory) AdvanceDigestRun(_ context.Context, period string, cursor int64, n int, done bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[period]
	if !ok {
		return store.ErrNoRun
	}
	if cursor > r.Cursor { // a page not past the cursor was counted
		r.Cursor, r.Planned = cursor, r.Planned+int64(n)
	}
	if done {
		r.State, r.PlannedAt = store.RunPlanned, m.now().UTC()
	}
	return nil
}

// AudienceAfter implements store.Digests.
func (m *Memory) AudienceAfter(_ context.Context, topic string, cursor int64, limit int) ([]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []int64
	for _, id := range slices.Sorted(maps.Keys(m.byID)) {
		s := m.byID[id]
		if id > cursor && s.Status == store.Active && (topic == "" || slices.Contains(s.Topics, topic)) {
			if ids = append(ids, id); len(ids) == limit {
				break
			}
		}
	}
	return ids, nil
}

// SubscribersByID implements store.Digests.
func (m *Memory) SubscribersByID(_ context.Context, ids []int64) ([]store.Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]store.Subscriber, len(ids))
	for i, id := range ids {
		if s, ok := m.byID[id]; ok {
			out[i] = copyOf(s)
		}
	}
	return out, nil
}

// SetOutcome implements store.Digests.
func (m *Memory) SetOutcome(_ context.Context, period, outcome string, ids ...int64) error {
	if outcome != store.OutcomeSkipped && outcome != store.OutcomeFailed {
		return errors.New("unknown outcome " + outcome)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := period + ":" + outcome
	if m.outcomes[key] == nil {
		m.outcomes[key] = map[int64]bool{}
	}
	for _, id := range ids {
		m.outcomes[key][id] = true
	}
	return nil
}
