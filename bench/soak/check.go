package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// unsubGrace is how long after an acknowledged unsubscribe a mail
// without a Date header may still land: one whose send had passed the
// worker's re-check of the subscription when the answer went out (the
// SMTP exchange in flight).
const unsubGrace = 5 * time.Second

// afterUnsub counts a mail to a person who left: a breach when it was
// composed after the acknowledgement (its Date, whole seconds rounded
// down, later than the answer: composed later for sure), else in flight
// when it landed after it (composed before, delivered through a slow
// relay: reported, not a breach).
func afterUnsub(p *person, m mail, v *verdict) {
	switch {
	case !m.composed.IsZero() && m.composed.After(p.unsubAck),
		m.composed.IsZero() && m.at.After(p.unsubAck.Add(unsubGrace)):
		v.afterUnsub++
		v.note(fmt.Sprintf("%s: %s composed %s, landed %s, after the unsubscribe acknowledged at %s",
			p.email, m.kind, m.composed.Format(time.TimeOnly), m.at.Format(time.TimeOnly), p.unsubAck.Format(time.TimeOnly)))
	case m.at.After(p.unsubAck):
		v.inFlight++
	}
}

// asynqEarly: asynq keeps scheduled tasks with a whole-second score, so
// a task may run up to a second before its due time.
const asynqEarly = time.Second

// verdict is the checker's count of each invariant's breaches.
type verdict struct {
	people, lost, wrongState, missing, dups, afterUnsub, early int
	inFlight                                                   int
	dupKinds                                                   map[string]int // duplicates by kind of mail
	pending, archived                                          int
	archivedReasons                                            []string
	notes                                                      []string
}

// checkMails holds the mails against the ledger: what was due arrived,
// once (duplicates counted), none after an unsubscribe, none early.
// final says the queues are drained: only then is a missing mail a
// breach.
func checkMails(led *ledger, mails []mail, welcomeDelay time.Duration, final bool, v *verdict) {
	byTo := map[string][]mail{}
	for _, m := range mails {
		byTo[m.to] = append(byTo[m.to], m)
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	for _, email := range led.order {
		p := led.people[email]
		if p.signupAck.IsZero() {
			continue
		}
		count := map[string]int{}
		bundles := false // events mails counted by the events in them (mails.go)
		for _, m := range byTo[email] {
			count[m.kind]++
			for _, n := range m.events {
				count["events:"+n]++
				bundles = true
			}
			if !p.unsubAck.IsZero() && m.kind != "confirm" {
				afterUnsub(p, m, v)
			}
			if m.kind == "welcome" && !p.confirmAck.IsZero() && m.at.Before(p.confirmAck.Add(welcomeDelay-asynqEarly)) {
				v.early++
			}
		}
		for kind, n := range count {
			if kind == "events" && bundles {
				continue // one mail per bundle: its events are what may not repeat
			}
			if n > 1 {
				v.dups += n - 1
				v.dupKinds = addCount(v.dupKinds, strings.SplitN(kind, ":", 2)[0], n-1)
			}
		}
		if !final {
			continue
		}
		due := []string{"confirm"}
		if !p.confirmAck.IsZero() && p.unsubAck.IsZero() && !p.unsubTried {
			due = append(due, "welcome")
			if p.eventAcks > 0 {
				due = append(due, "events")
			}
			for _, is := range led.issues {
				if p.confirmAck.Before(is.sentAck) {
					due = append(due, "issue:"+is.subject)
				}
			}
			for _, text := range p.texts {
				due = append(due, "sms:"+text)
			}
		}
		for _, kind := range due {
			if count[kind] == 0 {
				v.missing++
				v.note(fmt.Sprintf("%s: no %s mail", email, kind))
			}
		}
	}
}

func addCount(m map[string]int, k string, n int) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[k] += n
	return m
}

func (v *verdict) note(s string) {
	if len(v.notes) < 30 {
		v.notes = append(v.notes, s)
	}
}

// checkState reads every acknowledged person back through the admin API:
// present (its export, GET /api/subscribers/{email}/export), in the
// state the last acknowledged write left, with the last acknowledged
// name (or one of a change not acknowledged, which may have landed).
func checkState(ctx context.Context, ld *loader, v *verdict) {
	ld.led.mu.Lock()
	people := make([]person, 0, len(ld.led.order))
	for _, e := range ld.led.order {
		people = append(people, *ld.led.people[e])
	}
	ld.led.mu.Unlock()
	for _, p := range people {
		v.people++
		code, raw, _, err := ld.do(ctx, "GET", "/api/subscribers/"+url.PathEscape(p.email)+"/export", "application/json", nil, true)
		if err != nil || (code != http.StatusOK && code != http.StatusNotFound) {
			v.note(fmt.Sprintf("%s: read back %d %v", p.email, code, err))
			v.lost++
			continue
		}
		if code == http.StatusNotFound {
			v.lost++
			v.note(p.email + ": acknowledged signup not found")
			continue
		}
		var export struct {
			Subscriber struct {
				Status string `json:"status"`
				Name   string `json:"name"`
			} `json:"subscriber"`
		}
		if err := json.Unmarshal(raw, &export); err != nil {
			v.note(fmt.Sprintf("%s: %v", p.email, err))
		}
		s := export.Subscriber
		if !p.nameAck.IsZero() && s.Name != p.name && !contains(p.namesUnacked, s.Name) {
			v.wrongState++
			v.note(fmt.Sprintf("%s: name %q, want the last acknowledged %q", p.email, s.Name, p.name))
		}
		want := []string{"pending", "active"} // a confirm that failed may still have landed
		switch {
		case !p.unsubAck.IsZero():
			want = []string{"unsubscribed"}
		case p.unsubTried && !p.confirmAck.IsZero():
			want = []string{"active", "unsubscribed"} // an unsubscribe answered 503 may have landed
		case !p.confirmAck.IsZero():
			want = []string{"active"}
		}
		if !contains(want, s.Status) {
			v.wrongState++
			v.note(fmt.Sprintf("%s: status %q, want %v", p.email, s.Status, want))
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// backlog is every task not done yet: pending, active, retrying, and
// scheduled ones already due; and the archived (dead-letter) ones.
func backlog(rdb redis.UniversalClient) (waiting, archived int, reasons []string, err error) {
	insp := asynq.NewInspectorFromRedisClient(rdb)
	queues, err := insp.Queues()
	if err != nil {
		return 0, 0, nil, err
	}
	for _, q := range queues {
		info, err := insp.GetQueueInfo(q)
		if err != nil {
			return 0, 0, nil, err
		}
		// Aggregating: events waiting in their bundle's group for its
		// grace (NEWSLETTER_GROUP_GRACE, 2 min): a drain that ended
		// without them missed the last events mails.
		waiting += info.Pending + info.Active + info.Retry + info.Aggregating
		archived += info.Archived
		if info.Archived > 0 {
			tasks, err := insp.ListArchivedTasks(q, asynq.PageSize(20))
			if err != nil {
				return 0, 0, nil, err
			}
			for _, t := range tasks {
				reasons = append(reasons, fmt.Sprintf("%s %s: %s", q, t.Type, strings.TrimSpace(t.LastErr)))
			}
		}
		sched, err := insp.ListScheduledTasks(q, asynq.PageSize(100))
		if err != nil {
			return 0, 0, nil, err
		}
		for _, t := range sched {
			if t.NextProcessAt.Before(time.Now().Add(-5 * time.Second)) {
				waiting++
			}
		}
	}
	return waiting, archived, reasons, nil
}
