package main

import (
	"math"
	netmail "net/mail"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email/smtptest"
)

func TestSlope(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	var pts []point
	for i := range 10 {
		pts = append(pts, point{at: t0.Add(time.Duration(i) * time.Minute), rss: float64(100 + 3*i)})
	}
	if got := slope(pts, t0, func(p point) float64 { return p.rss }); math.Abs(got-3) > 1e-9 {
		t.Fatalf("slope %v, want 3 a minute", got)
	}
	if got := slope(pts[:2], t0, func(p point) float64 { return p.rss }); got != 0 {
		t.Fatalf("slope of two points %v, want 0 (too few to fit)", got)
	}
}

// TestCheckMails: a duplicate, a mail after an acknowledged unsubscribe,
// an early welcome and a missing issue are each counted; what was due
// and came once is not.
func TestCheckMails(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	led := newLedger()
	good := led.person("good@example.org")
	good.signupAck, good.confirmAck = t0, t0.Add(time.Second)
	bad := led.person("bad@example.org")
	bad.signupAck, bad.confirmAck, bad.unsubAck = t0, t0.Add(time.Second), t0.Add(time.Minute)
	led.issues = []issue{{subject: "S", sentAck: t0.Add(30 * time.Second)}}
	mails := []mail{
		{to: "good@example.org", kind: "confirm", at: t0},
		{to: "good@example.org", kind: "welcome", at: t0.Add(7 * time.Second)},
		{to: "good@example.org", kind: "issue:S", at: t0.Add(40 * time.Second)},
		{to: "bad@example.org", kind: "confirm", at: t0},
		{to: "bad@example.org", kind: "confirm", at: t0.Add(time.Second)},
		{to: "bad@example.org", kind: "welcome", at: t0.Add(2 * time.Second)},
		{to: "bad@example.org", kind: "issue:S", at: t0.Add(2 * time.Minute)},
	}
	var v verdict
	checkMails(led, mails, 5*time.Second, true, &v)
	if v.dups != 1 || v.afterUnsub != 1 || v.early != 1 || v.missing != 0 {
		t.Fatalf("verdict %+v: want 1 duplicate, 1 after the unsubscribe, 1 early, none missing", v)
	}
	var missing verdict
	checkMails(led, mails[:2], 5*time.Second, true, &missing)
	if missing.missing != 2 { // good's issue; bad's confirmation
		t.Fatalf("missing %d, want 2 (%v)", missing.missing, missing.notes)
	}
}

// TestAfterUnsubscribeByDate: a mail composed (its Date) after the
// acknowledged unsubscribe is a breach; one composed before it that
// landed after it (a slow relay) is only counted as in flight.
func TestAfterUnsubscribeByDate(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	p := &person{email: "p@example.org", unsubAck: t0.Add(500 * time.Millisecond)}
	var v verdict
	afterUnsub(p, mail{kind: "events", composed: t0, at: t0.Add(9 * time.Second)}, &v)
	if v.afterUnsub != 0 || v.inFlight != 1 {
		t.Fatalf("composed before, landed after: %+v, want in flight only", v)
	}
	afterUnsub(p, mail{kind: "events", composed: t0.Add(time.Second), at: t0.Add(time.Second)}, &v)
	if v.afterUnsub != 1 {
		t.Fatalf("composed after: %+v, want a breach", v)
	}
}

// TestSteepestProcess: each process's slope is its own, not broken by
// the restart of another (whose RSS falls to nothing and climbs again).
func TestSteepestProcess(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	var pts []point
	for i := range 10 {
		procs := map[procKey]float64{{"api-1", 10}: 50e6 + float64(i)*1e6}
		if i != 4 { // worker-1 restarted: a new pid from the sample after
			pid := 20
			if i > 4 {
				pid = 21
			}
			procs[procKey{"worker-1", pid}] = 80e6
		}
		pts = append(pts, point{at: t0.Add(time.Duration(i) * time.Minute), procs: procs})
	}
	got, who := steepestProcess(pts, t0)
	if math.Abs(got-1) > 1e-9 || who != "api-1 (pid 10, 10 samples)" {
		t.Fatalf("steepest %v %q, want 1 MB/min of api-1", got, who)
	}
}

// TestEventsMailsCountedByTheirEvents: a person with events at different
// times gets one events mail per bundle, which is no duplicate; an event
// in two mails is one (the 30-minute run counted 109 "duplicates" of
// events mails that were bundles of other events). The titles are read
// from the mail as the sink took it.
func TestEventsMailsCountedByTheirEvents(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	led := newLedger()
	p := led.person("reader@example.org")
	p.signupAck, p.confirmAck, p.eventAcks = t0, t0.Add(time.Second), 3
	events := func(titles ...string) mail {
		data := "Subject: You have a new notification\r\n\r\n"
		for _, ti := range titles {
			data += "* " + ti + "\r\n<a href=\"https://example.com\">" + ti + "</a>\r\n"
		}
		return classify(smtptest.Message{To: []string{"reader@example.org"}, Data: []byte(data), At: t0,
			Header: netmail.Header{"Subject": {"You have 2 new notifications"}}}, "run")
	}
	mails := []mail{
		{to: "reader@example.org", kind: "confirm", at: t0},
		{to: "reader@example.org", kind: "welcome", at: t0.Add(7 * time.Second)},
		events("Event 1", "Event 2"), events("Event 3"),
	}
	var v verdict
	checkMails(led, mails, 5*time.Second, true, &v)
	if v.dups != 0 || v.missing != 0 {
		t.Fatalf("two bundles of different events: %+v, want no duplicate and nothing missing", v)
	}
	var again verdict
	checkMails(led, append(mails, events("Event 3")), 5*time.Second, true, &again)
	if again.dups != 1 || again.dupKinds["events"] != 1 {
		t.Fatalf("an event in two mails: %+v, want 1 events duplicate", again)
	}
}
