package main

import (
	"sort"
	"sync"
	"time"
)

// person is what the load generator knows of one address: the writes
// the service acknowledged (a 2xx or 3xx answer), with their times, and
// the links its mails brought.
type person struct {
	email      string
	signupAck  time.Time
	confirmAck time.Time
	unsubAck   time.Time
	name       string // the name of the last acknowledged preference change
	nameAck    time.Time
	eventAcks  int
	firstEvent time.Time
	// phone is the number acknowledged for the person (PUT
	// /api/subscribers/{email}/phone); smsOn when their choice of texts
	// for updates was acknowledged; texts the bodies of the events
	// acknowledged after it: each is due as a text.
	phone string
	smsOn time.Time
	texts []string

	confirmToken string // from the confirmation mail
	prefsToken   string // from the welcome's footer
	confirmTried bool
	// unsubTried: an unsubscribe was sent, acknowledged or not. A 503
	// (too few replicas had it) discards the answer, not the write: the
	// person may have left, so what is due to them is not known.
	unsubTried bool
	// namesUnacked are the names of preference changes not acknowledged:
	// any of them may have landed after the last acknowledged one.
	namesUnacked []string
}

// issue is one issue the soak published and sent.
type issue struct {
	id      string
	subject string
	sentAck time.Time
}

// sample is one request's answer time, for the p99s.
type sample struct {
	at      time.Time
	latency time.Duration
	ok      bool
}

// ledger holds everything acknowledged, for the checker.
type ledger struct {
	mu        sync.Mutex
	people    map[string]*person
	order     []string
	issues    []issue
	subscribe []sample
	acks      int // every acknowledged write
	failed    map[string]int
}

func newLedger() *ledger {
	return &ledger{people: map[string]*person{}, failed: map[string]int{}}
}

func (l *ledger) person(email string) *person {
	p := l.people[email]
	if p == nil {
		p = &person{email: email}
		l.people[email] = p
		l.order = append(l.order, email)
	}
	return p
}

// phones maps each acknowledged number to its person's address.
func (l *ledger) phones() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]string{}
	for _, p := range l.people {
		if p.phone != "" {
			out[p.phone] = p.email
		}
	}
	return out
}

// pick returns an address that fits, walking from a random start.
func (l *ledger) pick(start int, fits func(*person) bool) *person {
	n := len(l.order)
	for i := range n {
		if p := l.people[l.order[(start+i)%n]]; fits(p) {
			return p
		}
	}
	return nil
}

// p99 is the 99th percentile of the subscribe answers inside the
// windows (all of them when windows is nil), and how many there were.
func (l *ledger) p99(inside func(time.Time) bool) (time.Duration, int) {
	l.mu.Lock()
	var ds []time.Duration
	for _, s := range l.subscribe {
		if inside == nil || inside(s.at) {
			ds = append(ds, s.latency)
		}
	}
	l.mu.Unlock()
	if len(ds) == 0 {
		return 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[(len(ds)*99)/100], len(ds)
}
