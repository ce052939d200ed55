package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// testClock is a clock the test sets: the worker's Now.
type testClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *testClock) Now() time.Time   { c.mu.Lock(); defer c.mu.Unlock(); return c.at }
func (c *testClock) Set(at time.Time) { c.mu.Lock(); c.at = at; c.mu.Unlock() }
func (c *testClock) String() string   { return c.Now().Format(time.RFC3339) }
func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// heldBatch is an issue batch waiting for its time in the queue.
type heldBatch struct {
	id  string
	due time.Time
	ids []int64
}

// heldIssueBatches lists the issue batches scheduled in the critical
// queue.
func (d *delivery) heldIssueBatches(t *testing.T) []heldBatch {
	t.Helper()
	infos, err := d.insp.ListScheduledTasks(tasks.QueueCritical, asynq.PageSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	var out []heldBatch
	for _, ti := range infos {
		if ti.Type != tasks.TypeIssueEmail {
			continue
		}
		p, err := tasks.IssueEmail.Decode(ti.Payload)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, heldBatch{id: ti.ID, due: ti.NextProcessAt.UTC(), ids: p.IDs})
	}
	return out
}

// TestIssueAtLocalHourAcrossZones sends an issue at 09:00 in each reader's
// own time zone, on a clock the test controls (the worker's Now; asynq
// holds each batch until the test moves the clock to its time and lets
// it run). Readers in New York, Berlin and Tokyo, and readers without a
// zone (or with one nobody knows) at the publisher's default: each
// reader's batch is due at 09:00 where they are, nobody gets the issue
// before their hour, and nobody twice, though the issue is paused and
// resumed between two zones' hours (the resume plans everyone again).
func TestIssueAtLocalHourAcrossZones(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	// A winter day far ahead, 05:00 UTC: asynq keeps batches due then
	// in its scheduled set until the test runs them. Berlin's 09:00 is
	// still ahead (08:00Z), New York's too (14:00Z), Tokyo's has passed
	// (14:00 there: tomorrow's 00:00Z), and the default zone's
	// (São Paulo, UTC-3) is at 12:00Z. The day is fixed, not "next
	// year": miniredis hands asynq's scripts a score such as 1800000000
	// (2027-01-15 08:00Z) as "1.8e+9", which asynq cannot read, and no
	// whole hour within three days of this one is a multiple of 100,000 s.
	start := time.Date(2099, time.January, 15, 5, 0, 0, 0, time.UTC)
	clock := &testClock{at: start}
	d.now, d.zone = clock.Now, mustZone(t, "America/Sao_Paulo")
	zones := map[string]string{"ny": "America/New_York", "be": "Europe/Berlin", "tk": "Asia/Tokyo", "no": "", "xx": "Mars/Olympus_Mons"}
	readers := map[string][]string{} // zone name ("" default) -> addresses
	var all []string
	for prefix, zone := range zones {
		emails := seed(t, d.store, prefix, 12, func(r *store.SubscribeRequest) { r.Timezone, r.Topics = zone, []string{topics.Updates} })
		if zone == "Mars/Olympus_Mons" {
			zone = "" // unknown: the default
		}
		readers[zone] = append(readers[zone], emails...)
		all = append(all, emails...)
	}
	// Readers of another topic get nothing, whatever their zone.
	others := seed(t, d.store, "ot", 5, func(r *store.SubscribeRequest) { r.Timezone, r.Topics = "Europe/Berlin", []string{topics.Digest} })
	d.startWorker(t, 100000, 4)

	is, err := d.store.CreateIssue(ctx, store.IssueContent{Subject: "Good morning", Body: "It is **09:00** where you are.", Topics: []string{topics.Updates}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if is, err = d.store.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending, store.IssueChange{SetSchedule: true, LocalTime: "09:00"}); err != nil {
		t.Fatal(err)
	}
	plan := func(round int) {
		t.Helper()
		// The plan itself runs at once (real time); its batches are
		// due on the test's clock.
		if _, err := d.client.Enqueue(tasks.NewIssuePlan(is.ID, round, time.Now()).Task); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, poll.BusyMachine, func() error {
			p, err := d.store.IssueProgress(ctx, is.ID)
			if err == nil && p.Round == round && p.PlanDone {
				return nil
			}
			return fmt.Errorf("round %d not planned: %+v %v", round, p, err)
		})
	}
	plan(1)

	// Each reader's batch is due at the first 09:00 after the start in
	// their own zone.
	byID := map[int64]string{}
	for _, e := range all {
		s, err := d.store.Get(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		byID[s.ID] = e
	}
	dueOf := map[string]time.Time{}
	for _, b := range d.heldIssueBatches(t) {
		for _, id := range b.ids {
			dueOf[byID[id]] = b.due
		}
	}
	wantDue := map[string]time.Time{}
	for zone, emails := range readers {
		loc := d.zone
		if zone != "" {
			loc = mustZone(t, zone)
		}
		for _, e := range emails {
			due := dueOf[e]
			if local := due.In(loc); local.Format("15:04") != "09:00" || !due.After(start) || due.Sub(start) > 24*time.Hour {
				t.Fatalf("%s (zone %q) is due at %s (%s there), want the first 09:00 after %s", e, zone, due, local, start)
			}
			wantDue[e] = due
		}
	}
	if len(dueOf) != len(all) {
		t.Fatalf("%d readers held for their hour, want %d", len(dueOf), len(all))
	}

	// runDue moves the clock to at and lets every batch due by then run;
	// then exactly the readers due by then have the issue, once.
	runDue := func(at time.Time) {
		t.Helper()
		clock.Set(at)
		for _, b := range d.heldIssueBatches(t) {
			if !b.due.After(at) {
				if err := d.insp.RunTask(tasks.QueueCritical, b.id); err != nil {
					t.Fatal(err)
				}
			}
		}
		poll.Until(t, poll.BusyMachine, func() error {
			if left := issueWork(d.insp); left != "" {
				return fmt.Errorf("at %s the issue's batches still run: %s", clock, left)
			}
			return nil
		})
		got := map[string]int{}
		for _, m := range d.smtp.Messages() {
			got[strings.ToLower(m.To[0])]++
		}
		for _, e := range all {
			want := 0
			if !wantDue[e].After(at) {
				want = 1
			}
			if got[e] != want {
				t.Fatalf("at %s %s (due %s) has %d mails, want %d", at, e, wantDue[e], got[e], want)
			}
		}
		for _, e := range others {
			if got[e] != 0 {
				t.Fatalf("%s, no reader of the issue's topic, got it", e)
			}
		}
	}
	var hours []time.Time
	for _, due := range wantDue {
		if !slices.ContainsFunc(hours, due.Equal) {
			hours = append(hours, due)
		}
	}
	slices.SortFunc(hours, time.Time.Compare)
	if len(hours) != 4 {
		t.Fatalf("due at %v, want four hours (Berlin, the default, New York, Tokyo)", hours)
	}
	runDue(hours[0].Add(-time.Minute)) // before anyone's hour: nobody
	runDue(hours[0])                   // Berlin
	runDue(hours[1])                   // the default zone

	// Paused and resumed between two zones' hours: the resume plans
	// everyone again (those already sent by their marks, those held by
	// new batches beside the old ones), and still nobody gets it twice.
	if _, err := d.store.TransitionIssue(ctx, is.ID, []string{store.IssueSending}, store.IssuePaused, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	if is, err = d.store.TransitionIssue(ctx, is.ID, []string{store.IssuePaused}, store.IssueSending, store.IssueChange{NewRound: true}); err != nil {
		t.Fatal(err)
	}
	plan(is.Round)
	runDue(hours[1])
	runDue(hours[2]) // New York
	runDue(hours[3]) // Tokyo
	// Whatever the resume held for tomorrow finds everyone sent.
	runDue(hours[3].Add(48 * time.Hour))
	d.exactlyOnce(t, all)
	p := d.waitIssueSent(t, is.ID)
	if p.Planned != int64(len(all)) || p.Sent != int64(len(all)) || p.Failed != 0 {
		t.Fatalf("progress %+v, want %d planned and sent", p, len(all))
	}
	// Many batches in two rounds, one rendering of the Markdown.
	if n := testutil.ToFloat64(d.metrics.IssueRenders); n != 1 {
		t.Fatalf("the body was rendered %v times, want once", n)
	}
}

// issueWork names the issue tasks that wait to run, run or wait for a
// retry (the held ones aside); "" when there are none.
func issueWork(insp *asynq.Inspector) string {
	var left []string
	for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){insp.ListPendingTasks, insp.ListActiveTasks, insp.ListRetryTasks} {
		infos, err := list(tasks.QueueCritical)
		if errors.Is(err, asynq.ErrQueueNotFound) {
			continue // nothing was ever queued there
		}
		if err != nil {
			return err.Error()
		}
		for _, ti := range infos {
			if ti.Type == tasks.TypeIssueEmail || ti.Type == tasks.TypeIssuePlan {
				left = append(left, fmt.Sprintf("%s (%s, %q)", ti.ID, ti.State, ti.LastErr))
			}
		}
	}
	return strings.Join(left, ", ")
}

// TestScheduledPlanNeverStartsEarly: a plan that runs before its issue's
// time (a relay or a clock apart) leaves the issue scheduled and comes
// back at that time, not counted as a failure.
func TestScheduledPlanNeverStartsEarly(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	clock := &testClock{at: time.Date(2099, time.January, 15, 5, 0, 7, 0, time.UTC)}
	d.now = clock.Now
	seed(t, d.store, "early", 2, func(r *store.SubscribeRequest) { r.Topics = []string{topics.Updates} })
	d.startWorker(t, 100000, 2)
	is, err := d.store.CreateIssue(ctx, store.IssueContent{Subject: "Early", Body: "text", Topics: []string{topics.Updates}}, "")
	if err != nil {
		t.Fatal(err)
	}
	at := clock.Now().Add(time.Hour)
	if _, err := d.store.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueScheduled,
		store.IssueChange{Round: 1, SetSchedule: true, SendAt: at}); err != nil {
		t.Fatal(err)
	}
	// Due now in real time: asynq runs it at once, an hour early on the
	// worker's clock.
	if _, err := d.client.Enqueue(tasks.NewIssuePlan(is.ID, 1, time.Now()).Task); err != nil {
		t.Fatal(err)
	}
	var info *asynq.TaskInfo
	poll.Until(t, poll.BusyMachine, func() error {
		info, err = d.insp.GetTaskInfo(tasks.QueueCritical, tasks.IssuePlanTaskID(is.ID, 1))
		if err == nil && info.State == asynq.TaskStateRetry {
			return nil
		}
		return fmt.Errorf("the early plan: %+v %v", info, err)
	})
	if !strings.Contains(info.LastErr, "time is") || info.NextProcessAt.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("the early plan comes back %s (%q), want about an hour later", info.NextProcessAt, info.LastErr)
	}
	if got, _ := d.store.Issue(ctx, is.ID); got.Status != store.IssueScheduled {
		t.Fatalf("an early plan moved the issue to %s", got.Status)
	}
	if n := len(d.smtp.Messages()); n != 0 {
		t.Fatalf("%d mails before the issue's time", n)
	}
}
