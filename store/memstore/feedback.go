package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/newsletter/newsletter/store"
)

// RecordFeedback implements store.Suppressions.
func (m *Memory) RecordFeedback(_ context.Context, f store.Feedback, p store.FeedbackPolicy) (store.FeedbackResult, error) {
	if !f.Type.Valid() {
		return store.FeedbackResult{}, fmt.Errorf("feedback type %q: want hard, soft or complaint", f.Type)
	}
	if f.Email == "" && f.SubscriberID <= 0 {
		return store.FeedbackResult{}, errors.New("feedback names no address")
	}
	if p.SoftLimit <= 0 {
		p.SoftLimit = store.DefaultSoftBounceLimit
	}
	if p.SoftWindow <= 0 {
		p.SoftWindow = store.DefaultSoftBounceWindow
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.ID != "" {
		if m.seen[f.ID] {
			return store.FeedbackResult{Duplicate: true}, nil
		}
		m.seen[f.ID] = true
	}
	var s *store.Subscriber
	if f.SubscriberID > 0 {
		s = m.byID[f.SubscriberID]
		if s != nil && f.Email != "" && s.Email != f.Email {
			s = nil
		}
	} else {
		s = m.byEmail[f.Email]
	}
	if s == nil {
		return store.FeedbackResult{}, store.ErrNotFound
	}
	now := m.now().UTC().Truncate(time.Millisecond)
	m.people.feedback[s.ID] = append([]store.FeedbackEvent{{Type: f.Type, At: now}}, m.people.feedback[s.ID]...)
	var to store.Status
	res := store.FeedbackResult{}
	switch f.Type {
	case store.Complaint:
		to = store.Complained
	case store.HardBounce:
		to = store.Bounced
	default:
		var recent []time.Time
		for _, at := range m.soft[s.ID] {
			if now.Sub(at) < p.SoftWindow {
				recent = append(recent, at)
			}
		}
		recent = append(recent, now)
		m.soft[s.ID] = recent
		res.SoftBounces = len(recent)
		if len(recent) >= p.SoftLimit {
			to = store.Bounced
		}
	}
	if to != "" {
		m.cancelReconfirm(s.ID)
	}
	if to != "" && s.Status != store.Complained && s.Status != to {
		s.Status, s.UnsubscribedAt = to, now
		res.Changed = true
		m.count(map[store.Status]string{store.Bounced: "bounce", store.Complained: "complaint"}[to])
	}
	if s.Status == store.Bounced || s.Status == store.Complained {
		s.Topics = nil // ended: no topics, as after end
	}
	if f.Digest && m.latest != "" {
		if r := m.runs[m.latest]; r != nil {
			if f.Type == store.Complaint {
				r.Complaints++
			} else {
				r.Bounces++
			}
		}
	}
	if is := m.issues[f.Issue]; is != nil {
		if f.Type == store.Complaint {
			is.prog.Complaints++
		} else {
			is.prog.Bounces++
		}
	}
	res.Subscriber = copyOf(s)
	return res, nil
}

// Suppressed implements store.Suppressions.
func (m *Memory) Suppressed(_ context.Context, status store.Status, after int64, limit int) ([]store.Subscriber, error) {
	if status != "" && status != store.Bounced && status != store.Complained {
		return nil, fmt.Errorf("status %q is no suppression: want bounced or complained", status)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Subscriber
	for _, s := range m.byID {
		if s.ID > after && (s.Status == store.Bounced || s.Status == store.Complained) && (status == "" || s.Status == status) {
			out = append(out, *s)
		}
	}
	slices.SortFunc(out, func(a, b store.Subscriber) int { return int(a.ID - b.ID) })
	if len(out) > limit {
		out = out[:max(limit, 0)]
	}
	return out, nil
}

// LiftSuppression implements store.Suppressions.
func (m *Memory) LiftSuppression(_ context.Context, email string) (store.Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byEmail[email]
	if !ok {
		return store.Subscriber{}, store.ErrNotFound
	}
	switch {
	case s.Status == store.Bounced && !s.ConfirmedAt.IsZero():
		// The suppression took the topics away: the defaults again.
		s.Status, s.UnsubscribedAt, s.Topics = store.Active, time.Time{}, m.topics.Defaults()
	case s.Status == store.Bounced || s.Status == store.Complained:
		s.Status, s.Topics = store.Unsubscribed, nil
	default:
		return copyOf(s), store.ErrNotSuppressed
	}
	delete(m.soft, s.ID)
	delete(m.reconfirms, s.ID)
	return copyOf(s), nil
}
