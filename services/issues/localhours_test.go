package issues_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// localHours is a local-hour send's world: readers in Berlin (09:00 is
// 08:00 UTC) and Tokyo (09:00 is 00:00 UTC the next day), a clock at
// 05:00 UTC, a worker, and the service on the same clock.
type localHours struct {
	d     *delivery
	clock *testClock
	svc   *issues.Service
}

func newLocalHours(t *testing.T) *localHours {
	t.Helper()
	d := newDelivery(t)
	clock := &testClock{at: time.Date(2099, time.January, 15, 5, 0, 7, 0, time.UTC)}
	d.now, d.zone = clock.Now, mustZone(t, "UTC")
	seedReaders(t, d.store, "berlin", 3, "Europe/Berlin")
	seedReaders(t, d.store, "tokyo", 3, "Asia/Tokyo")
	d.startWorker(t, 100000, 4)
	jobs := tasks.NewDispatcher(d.client, d.store, discard)
	t.Cleanup(jobs.Close)
	return &localHours{d: d, clock: clock, svc: &issues.Service{Store: d.store, Jobs: jobs, Log: discard, Now: clock.Now}}
}

// sendAtNine makes an issue and sends it at 09:00 local, then waits
// for its planner's walk to end.
func (l *localHours) sendAtNine(t *testing.T, subject string) store.Issue {
	t.Helper()
	ctx := context.Background()
	is, err := l.d.store.CreateIssue(ctx, store.IssueContent{Subject: subject, Body: "first text", Topics: []string{topics.Updates}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if is, _, err = l.svc.Send(ctx, is, issues.When{LocalTime: "09:00"}, issues.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	if is.Status != store.IssueScheduled || is.LocalTime != "09:00" {
		t.Fatalf("after a local-hour send: %s %q, want scheduled at 09:00", is.Status, is.LocalTime)
	}
	// The plan is due on the test's clock, which asynq does not read.
	l.run(t, l.due(t, tasks.TypeIssuePlan))
	poll.Until(t, poll.BusyMachine, func() error {
		p, err := l.d.store.IssueProgress(ctx, is.ID)
		if err != nil || !p.PlanDone || issueWork(l.d.insp) != "" {
			return fmt.Errorf("the plan of issue %d: %+v %v %s", is.ID, p, err, issueWork(l.d.insp))
		}
		return nil
	})
	if is, err = l.d.store.Issue(ctx, is.ID); err != nil {
		t.Fatal(err)
	}
	return is
}

// due are the ids of the issue tasks of type typ due on the clock.
func (l *localHours) due(t *testing.T, typ string) []string {
	t.Helper()
	infos, err := l.d.insp.ListScheduledTasks(tasks.QueueCritical, asynq.PageSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	var due []string
	for _, ti := range infos {
		if ti.Type == typ && !ti.NextProcessAt.After(l.clock.Now()) {
			due = append(due, ti.ID)
		}
	}
	return due
}

func (l *localHours) run(t *testing.T, ids []string) {
	t.Helper()
	for _, id := range ids {
		if err := l.d.insp.RunTask(tasks.QueueCritical, id); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			t.Error(err)
		}
	}
}

func (l *localHours) settle(t *testing.T) {
	t.Helper()
	poll.Until(t, poll.BusyMachine, func() error {
		if left := issueWork(l.d.insp); left != "" {
			return fmt.Errorf("issue tasks still run: %s", left)
		}
		return nil
	})
}

// A local-hour send is scheduled, with the span of its readers' hours,
// until the first of them: edited and rescheduled as any scheduled
// issue, nobody mailed; the first hour's batch moves it to sending with
// the content it had then.
func TestLocalHoursScheduledUntilFirstHour(t *testing.T) {
	ctx := context.Background()
	l := newLocalHours(t)
	is := l.sendAtNine(t, "Local")
	first, last := time.Date(2099, time.January, 15, 8, 0, 0, 0, time.UTC), time.Date(2099, time.January, 16, 0, 0, 0, 0, time.UTC)
	if is.Status != store.IssueScheduled || !is.FirstLocal.Equal(first) || !is.LastLocal.Equal(last) {
		t.Fatalf("planned: %s, first %s last %s; want scheduled, first %s last %s", is.Status, is.FirstLocal, is.LastLocal, first, last)
	}
	allowed := issues.Allowed(is)
	for _, move := range []string{"edit", "send", "reschedule", "unschedule", "pause", "cancel"} {
		if !allowed[move] {
			t.Errorf("a local-hour send waiting for its first hour does not allow %s", move)
		}
	}
	if n := len(l.d.smtp.Messages()); n != 0 {
		t.Fatalf("%d mails before anyone's hour", n)
	}
	edited := store.IssueContent{Subject: "Local", Body: "edited text", Topics: []string{topics.Updates}}
	if _, err := l.svc.Update(ctx, topics.Default(0), is, 0, edited); err != nil {
		t.Fatalf("edit while waiting: %v", err)
	}
	l.clock.Set(first.Add(30 * time.Second))
	l.run(t, l.due(t, tasks.TypeIssueEmail))
	l.settle(t)
	got, err := l.d.store.Issue(ctx, is.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.IssueSending {
		t.Fatalf("after the first hour's batch: %s, want sending", got.Status)
	}
	msgs := l.d.smtp.Messages()
	if len(msgs) != 3 {
		t.Fatalf("%d mails at Berlin's hour, want its 3 readers'", len(msgs))
	}
	for _, m := range msgs {
		if !strings.HasPrefix(strings.ToLower(m.To[0]), "berlin") || !strings.Contains(string(m.Data), "edited text") {
			t.Fatalf("a mail to %s at Berlin's hour, edited text %v", m.To[0], strings.Contains(string(m.Data), "edited text"))
		}
	}
	if _, err := l.svc.Update(ctx, topics.Default(0), got, 0, edited); !errors.Is(err, store.ErrIssueState) {
		t.Fatalf("an edit once sending: %v, want refused", err)
	}
}

// A reschedule racing the first hour's batch: the batch's move to
// sending and the reschedule each check the status and the round, so
// exactly one wins. Either the reschedule landed (scheduled, nobody
// mailed: the old round's batch did nothing) or the batch did (sending,
// Berlin mailed, the reschedule refused naming the status).
func TestLocalHoursRescheduleRacesFirstBatch(t *testing.T) {
	ctx := context.Background()
	l := newLocalHours(t)
	outcomes := map[string]int{}
	for i := range 6 {
		l.clock.Set(time.Date(2099, time.January, 15, 5, 0, 7, 0, time.UTC).Add(time.Duration(i) * 48 * time.Hour))
		before := len(l.d.smtp.Messages())
		is := l.sendAtNine(t, fmt.Sprintf("Race %d", i))
		l.clock.Set(is.FirstLocal.Add(30 * time.Second))
		due := l.due(t, tasks.TypeIssueEmail)
		if len(due) == 0 {
			t.Fatal("no batch due at the first hour")
		}
		var wg sync.WaitGroup
		var rerr error
		reschedule := func() { _, rerr = l.svc.Reschedule(ctx, is, issues.When{LocalTime: "10:00"}) }
		if i%2 == 0 {
			wg.Go(reschedule)
			wg.Go(func() { l.run(t, due) })
		} else {
			// The batch handed to the worker first: it may be running
			// as the reschedule lands (asynq cannot delete it then).
			l.run(t, due)
			wg.Go(reschedule)
		}
		wg.Wait()
		l.settle(t)
		got, err := l.d.store.Issue(ctx, is.ID)
		if err != nil {
			t.Fatal(err)
		}
		mailed := len(l.d.smtp.Messages()) - before
		switch {
		case rerr == nil && got.Status == store.IssueScheduled && got.LocalTime == "10:00" && mailed == 0:
			outcomes["reschedule first"]++
		case errors.Is(rerr, store.ErrIssueState) && got.Status == store.IssueSending && mailed == 3:
			outcomes["batch first"]++
		default:
			t.Fatalf("round %d: reschedule %v, issue %s at %q, %d mailed: neither won whole", i, rerr, got.Status, got.LocalTime, mailed)
		}
		if _, err := l.svc.Cancel(ctx, got); err != nil {
			t.Fatal(err)
		}
		l.settle(t)
	}
	t.Logf("outcomes: %v", outcomes)
}
