package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/newsletter/newsletter/store"
)

// people is the memory store's side of store.People: what the Redis
// store keeps in its consent hashes, logs, erased set and day counters.
type people struct {
	consent  map[int64]store.Consent
	feedback map[int64][]store.FeedbackEvent // newest first
	sentAt   map[store.Mark]time.Time
	erased   map[string]bool // lower-cased addresses (the Redis store keeps keyed hashes)
	days     map[string]map[string]int64
}

func newPeople() people {
	return people{consent: map[int64]store.Consent{}, feedback: map[int64][]store.FeedbackEvent{},
		sentAt: map[store.Mark]time.Time{}, erased: map[string]bool{}, days: map[string]map[string]int64{}}
}

// count adds one to today's counter field (the Redis store's prefixDay
// fields). The caller holds m.mu.
func (m *Memory) count(field string) {
	day := m.now().UTC().Format(time.DateOnly)
	if m.people.days[day] == nil {
		m.people.days[day] = map[string]int64{}
	}
	m.people.days[day][field]++
}

// ListSubscribers implements store.People.
func (m *Memory) ListSubscribers(_ context.Context, q store.SubscriberQuery) (store.SubscriberPage, error) {
	if q.Limit < 1 || q.Limit > store.MaxSubscriberPage || q.After < 0 {
		return store.SubscriberPage{}, fmt.Errorf("%w: limit %d, after %d", store.ErrBadQuery, q.Limit, q.After)
	}
	if q.Status != "" && !q.Status.Valid() {
		return store.SubscriberPage{}, fmt.Errorf("%w: unknown status %q", store.ErrBadQuery, q.Status)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if q.Topic != "" && !slices.Contains(m.topics.IDs(), q.Topic) {
		return store.SubscriberPage{}, fmt.Errorf("%w: unknown topic %q", store.ErrBadQuery, q.Topic)
	}
	var ids []int64
	for id, s := range m.byID {
		if id > q.After && (q.Status == "" || s.Status == q.Status) && (q.Topic == "" || slices.Contains(s.Topics, q.Topic)) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	page := store.SubscriberPage{Subscribers: []store.Subscriber{}}
	for _, id := range ids[:min(len(ids), q.Limit)] {
		page.Subscribers = append(page.Subscribers, copyOf(m.byID[id]))
	}
	if len(page.Subscribers) == q.Limit {
		page.Next = page.Subscribers[q.Limit-1].ID
	}
	return page, nil
}

// PersonalData implements store.People.
func (m *Memory) PersonalData(_ context.Context, email string) (store.PersonalData, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byEmail[email]
	if !ok {
		return store.PersonalData{}, store.ErrNotFound
	}
	now := m.now()
	out := store.PersonalData{Subscriber: m.view(s, now), Consent: m.people.consent[s.ID], Suppressed: s.Status.Suppressed(),
		Reconfirming: m.reconfirming(s, now), Mails: []store.SentMail{}, Feedback: slices.Clone(m.people.feedback[s.ID]),
		Push: slices.Clone(m.push[s.ID])}
	out.Consent.ConfirmedAt = s.ConfirmedAt
	if out.Feedback == nil {
		out.Feedback = []store.FeedbackEvent{}
	}
	if out.Push == nil {
		out.Push = []store.PushSubscription{}
	}
	var shared, own []store.SentMail
	for mk := range m.sent {
		if mk.SubscriberID != s.ID {
			continue
		}
		if mk.Shared {
			shared = append(shared, store.SentMail{Kind: mk.Kind, Key: mk.Key})
		} else {
			own = append(own, store.SentMail{Kind: mk.Kind, Key: mk.Key, At: m.people.sentAt[mk]})
		}
	}
	byName := func(a, b store.SentMail) int { return strings.Compare(a.Kind+":"+a.Key, b.Kind+":"+b.Key) }
	slices.SortFunc(shared, byName)
	slices.SortFunc(own, func(a, b store.SentMail) int { return a.At.Compare(b.At) })
	out.Mails = append(append(out.Mails, shared...), own...)
	for _, at := range m.soft[s.ID] {
		if now.Sub(at) < store.DefaultSoftBounceWindow {
			out.SoftBounces++
		}
	}
	return out, nil
}

// Erase implements store.People.
func (m *Memory) Erase(_ context.Context, email string, outbox ...string) (store.Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byEmail[email]
	if !ok {
		return store.Subscriber{}, store.ErrNotFound
	}
	was := copyOf(s)
	delete(m.byEmail, email)
	delete(m.byID, s.ID)
	delete(m.push, s.ID)
	delete(m.soft, s.ID)
	delete(m.reconfirms, s.ID)
	delete(m.people.consent, s.ID)
	delete(m.people.feedback, s.ID)
	for mk := range m.people.sentAt {
		if mk.SubscriberID == s.ID {
			delete(m.people.sentAt, mk)
		}
	}
	for _, id := range outbox {
		delete(m.outbox, id)
	}
	for _, kind := range []string{store.HoldConfirm, store.HoldUnsubscribe} {
		delete(m.holds, holdKey(kind, email))
	}
	m.people.erased[strings.ToLower(email)] = true
	m.count("erase")
	return was, nil
}

// Stats implements store.People.
func (m *Memory) Stats(_ context.Context, days int) (store.Stats, error) {
	if days < 0 || days > store.MaxStatsDays {
		return store.Stats{}, fmt.Errorf("%w: %d days", store.ErrBadQuery, days)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := store.Stats{ByStatus: map[store.Status]int64{}, ByTopic: []store.TopicCount{}, Days: []store.DayCount{}}
	for _, st := range store.Statuses {
		out.ByStatus[st] = 0
	}
	byTopic := map[string]*store.TopicCount{}
	for _, t := range m.topics.IDs() {
		out.ByTopic = append(out.ByTopic, store.TopicCount{Topic: t})
	}
	for i := range out.ByTopic {
		byTopic[out.ByTopic[i].Topic] = &out.ByTopic[i]
	}
	for _, s := range m.byID {
		out.ByStatus[s.Status]++
		for _, t := range s.Topics {
			if c := byTopic[t]; c != nil {
				c.Subscribers++
				if s.Status == store.Active {
					c.Active++
				}
			}
		}
	}
	today := m.now().UTC()
	for i := range days {
		d := today.AddDate(0, 0, i-days+1).Format(time.DateOnly)
		f := m.people.days[d]
		out.Days = append(out.Days, store.DayCount{Day: d, Signups: f["signup"], Imports: f["import"],
			Confirmations: f["confirm"], Unsubscribes: f["unsubscribe"], Bounces: f["bounce"],
			Complaints: f["complaint"], Erasures: f["erase"]})
	}
	return out, nil
}

// setConsent records how id's subscription came in; an empty source keeps
// the one recorded. The caller holds m.mu.
func (m *Memory) setConsent(id int64, src store.ConsentSource, at time.Time) {
	if src == "" {
		src = m.people.consent[id].Source
	}
	m.people.consent[id] = store.Consent{Source: src, RequestedAt: at}
}
