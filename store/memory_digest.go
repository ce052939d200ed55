package store

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"
)

// AddItem implements Digests.
func (m *Memory) AddItem(_ context.Context, it Item) (Item, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	it.ID, it.PublishedAt = int64(len(m.items)+1), m.now().UTC().Truncate(time.Millisecond)
	m.items = append(m.items, it)
	return it, nil
}

// StartDigestRun implements Digests.
func (m *Memory) StartDigestRun(ctx context.Context, period string) (DigestRun, bool, error) {
	m.mu.Lock()
	created := false
	if _, ok := m.runs[period]; !ok {
		run := &DigestRun{Period: period, State: RunPlanning, CreatedAt: m.now().UTC().Truncate(time.Millisecond), Items: []Item{}}
		for _, it := range m.items {
			if it.ID > m.lastItem {
				run.Items = append(run.Items, it)
			}
		}
		if len(run.Items) == 0 {
			run.State = RunEmpty
		} else {
			m.lastItem = run.Items[len(run.Items)-1].ID
		}
		for _, s := range m.byID {
			if s.Status == Active {
				run.Audience++
			}
		}
		m.runs[period], m.latest, created = run, period, true
	}
	m.mu.Unlock()
	run, err := m.DigestRun(ctx, period)
	return run, created, err
}

// DigestRun implements Digests.
func (m *Memory) DigestRun(_ context.Context, period string) (DigestRun, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[period]
	if !ok {
		return DigestRun{}, ErrNoRun
	}
	run := *r
	run.Items = slices.Clone(r.Items)
	for mk := range m.sent {
		if mk.Kind == digestKind && mk.Key == period {
			run.Sent++
		}
	}
	run.Skipped = int64(len(m.outcomes[period+":"+OutcomeSkipped]))
	run.Failed = int64(len(m.outcomes[period+":"+OutcomeFailed]))
	return run, nil
}

// LatestDigestPeriod implements Digests.
func (m *Memory) LatestDigestPeriod(context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.latest, nil
}

// AdvanceDigestRun implements Digests.
func (m *Memory) AdvanceDigestRun(_ context.Context, period string, cursor int64, n int, done bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[period]
	if !ok {
		return ErrNoRun
	}
	r.Cursor, r.Planned = cursor, r.Planned+int64(n)
	if done {
		r.State, r.PlannedAt = RunPlanned, m.now().UTC()
	}
	return nil
}

// ActiveAfter implements Digests.
func (m *Memory) ActiveAfter(_ context.Context, cursor int64, limit int) ([]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []int64
	for _, id := range slices.Sorted(maps.Keys(m.byID)) {
		if id > cursor && m.byID[id].Status == Active {
			if ids = append(ids, id); len(ids) == limit {
				break
			}
		}
	}
	return ids, nil
}

// SubscribersByID implements Digests.
func (m *Memory) SubscribersByID(_ context.Context, ids []int64) ([]Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Subscriber, len(ids))
	for i, id := range ids {
		if s, ok := m.byID[id]; ok {
			out[i] = *s
		}
	}
	return out, nil
}

// ClaimMarks implements Digests.
func (m *Memory) ClaimMarks(ctx context.Context, marks []Mark, ttl time.Duration) ([]Claim, error) {
	out := make([]Claim, len(marks))
	for i, mk := range marks {
		out[i], _ = m.ClaimMark(ctx, mk, ttl)
	}
	return out, nil
}

// ReleaseMarks implements Digests.
func (m *Memory) ReleaseMarks(ctx context.Context, marks []Mark) error {
	for _, mk := range marks {
		m.ReleaseMark(ctx, mk)
	}
	return nil
}

// SetOutcome implements Digests.
func (m *Memory) SetOutcome(_ context.Context, period, outcome string, ids ...int64) error {
	if outcome != OutcomeSkipped && outcome != OutcomeFailed {
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
