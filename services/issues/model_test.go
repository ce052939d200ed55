package issues_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

// issueModel is the reference an issue's moves are checked against: the
// statuses and what each move allows, as the issues package documents
// them, written as plainly as possible.
type issueModel struct {
	status     string
	pausedFrom string
	sendAt     time.Time // scheduled "at"
	localTime  string    // scheduled at each reader's hour
	planned    time.Time // when a local-hour send was last planned: each reader's hour is the next after it
	version    int       // the content's version (1 at creation)
	// began is when sending began (zero before), frozen the version it
	// began with: what every reader must get.
	began  time.Time
	frozen int
	// cancelledWith is how many mails the issue had when it was
	// cancelled (-1: not cancelled): no more may come.
	cancelledWith int
}

func (m *issueModel) editable() bool {
	return m.status == store.IssueDraft || m.status == store.IssueScheduled
}
func (m *issueModel) scheduledOrPausedScheduled() bool {
	return m.status == store.IssueScheduled || (m.status == store.IssuePaused && m.pausedFrom == store.IssueScheduled)
}

// begin records that sending began now with the current version.
func (m *issueModel) begin(now time.Time) {
	m.status, m.began, m.frozen = store.IssueSending, now, m.version
}

// TestIssueLifecycleModel drives random sequences of the moves of an
// issue (edit, send at a time, at a local hour or now, pause, resume,
// reschedule, unschedule, cancel), steps of a clock the test controls and
// restarts of the worker, through the issues service and a real worker
// over SMTP, against issueModel. After every step: the service allowed
// exactly what the model allows; nobody got the issue before their time;
// nobody got it twice; nobody got it after a cancel; every mail carries
// the version saved last before sending began. At the end of each
// episode a sending issue reaches everyone.
//
// make test runs a few hundred steps; make test-stress sets
// NEWSLETTER_MODEL_STEPS for thousands. The seed is printed, and
// NEWSLETTER_MODEL_SEED replays one.
func TestIssueLifecycleModel(t *testing.T) {
	steps := 300
	if v, err := strconv.Atoi(os.Getenv("NEWSLETTER_MODEL_STEPS")); err == nil && v > 0 {
		steps = v
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("NEWSLETTER_MODEL_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (NEWSLETTER_MODEL_SEED=%d replays it), %d steps", seed, seed, steps)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	d := newDelivery(t)
	ctx := context.Background()
	// A winter day far ahead, on the test's clock: asynq holds every
	// plan and batch (due then in real time too) until the test runs it.
	// Scores of whole seconds within a week of this start are no
	// multiple of 100,000 s only by luck, so the times used avoid them
	// (miniredis hands asynq such a score as "4.0702e+09").
	clock := &testClock{at: time.Date(2099, time.January, 15, 5, 0, 7, 0, time.UTC)}
	d.now, d.zone = clock.Now, mustZone(t, "America/Sao_Paulo")
	zones := []string{"America/New_York", "Europe/Berlin", "Asia/Tokyo", ""}
	var readers []string
	zoneOf := map[string]string{}
	for i, zone := range zones {
		for _, e := range seedReaders(t, d.store, fmt.Sprintf("z%d", i), 3, zone) {
			readers = append(readers, e)
			zoneOf[e] = zone
		}
	}
	stop := d.startWorker(t, 100000, 4)
	jobs := tasks.NewDispatcher(d.client, d.store, discard)
	t.Cleanup(jobs.Close)
	svc := &issues.Service{Store: d.store, Jobs: jobs, Log: discard, Now: clock.Now}

	// received counts mails per issue per reader, and checks each one as
	// it is first seen: its time and its version.
	seen := 0
	received := map[int64]map[string]int{}
	check := func(step string, models map[int64]*issueModel, subjects map[string]int64) {
		t.Helper()
		msgs := d.smtp.Messages()
		for _, msg := range msgs[seen:] {
			subject := msg.Header.Get("Subject")
			id, ok := subjects[subject]
			if !ok {
				t.Fatalf("%s: a mail with subject %q of no issue", step, subject)
			}
			m := models[id]
			to := strings.ToLower(msg.To[0])
			if received[id] == nil {
				received[id] = map[string]int{}
			}
			received[id][to]++
			now := clock.Now()
			switch {
			case m.began.IsZero():
				t.Fatalf("%s: %s got issue %d, which never began sending (%+v)", step, to, id, *m)
			case m.cancelledWith >= 0:
				t.Fatalf("%s: %s got issue %d after its cancel", step, to, id)
			case received[id][to] > 1:
				t.Fatalf("%s: %s got issue %d twice", step, to, id)
			case !bytes.Contains(msg.Data, []byte(marker(id, m.frozen))):
				t.Fatalf("%s: %s got issue %d without version %d's text (the version when sending began)", step, to, id, m.frozen)
			}
			if m.localTime != "" {
				due, err := worker.LocalDue(m.planned, m.localTime, zoneOf[to], d.zone)
				if err != nil {
					t.Fatal(err)
				}
				if now.Before(due) {
					t.Fatalf("%s: %s got issue %d at %s, before their %s (%s)", step, to, id, now, m.localTime, due)
				}
			}
		}
		seen = len(msgs)
	}
	// runDue lets every issue task due on the test's clock run, then
	// waits until none runs or waits to be run.
	runDue := func() {
		t.Helper()
		now := clock.Now()
		infos, err := d.insp.ListScheduledTasks(tasks.QueueCritical, asynq.PageSize(1000))
		if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
			t.Fatal(err)
		}
		for _, ti := range infos {
			if (ti.Type == tasks.TypeIssueEmail || ti.Type == tasks.TypeIssuePlan) && !ti.NextProcessAt.After(now) {
				if err := d.insp.RunTask(tasks.QueueCritical, ti.ID); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
					t.Fatal(err)
				}
			}
		}
		poll.Until(t, poll.BusyMachine, func() error {
			if left := issueWork(d.insp); left != "" {
				return fmt.Errorf("at %s the issue's tasks still run: %s", clock, left)
			}
			return nil
		})
	}

	models := map[int64]*issueModel{}
	subjects := map[string]int64{}
	episode := 0
	for done := 0; done < steps; {
		episode++
		subject := fmt.Sprintf("Episode %d", episode)
		is, err := d.store.CreateIssue(ctx, store.IssueContent{Subject: subject, Body: "text", Topics: []string{topics.Updates}}, "")
		if err != nil {
			t.Fatal(err)
		}
		// The first version's text carries its marker too.
		if is, err = d.store.UpdateIssue(ctx, is.ID, 1, content(subject, is.ID, 2)); err != nil {
			t.Fatal(err)
		}
		m := &issueModel{status: store.IssueDraft, version: 2, cancelledWith: -1}
		models[is.ID], subjects[subject] = m, is.ID
		for range 10 + rng.IntN(20) {
			done++
			step := fmt.Sprintf("episode %d step %d", episode, done)
			if is, err = d.store.Issue(ctx, is.ID); err != nil {
				t.Fatal(err)
			}
			// The store's status may have moved on by itself: a
			// sending issue becomes sent when everyone has it.
			if m.status == store.IssueSending && is.Status == store.IssueSent {
				m.status = store.IssueSent
			}
			if is.Status != m.status {
				t.Fatalf("%s: the issue is %s, the model says %s (%+v)", step, is.Status, m.status, *m)
			}
			now := clock.Now()
			at := avoidRound(now.Add(time.Duration(1+rng.IntN(180)) * time.Minute))
			local := fmt.Sprintf("%02d:%02d", rng.IntN(24), 15*rng.IntN(4))
			var op string
			var got error
			var allowed bool
			switch k := rng.IntN(12); k {
			case 0, 1:
				op = "edit"
				allowed = m.editable()
				_, got = svc.Update(ctx, topics.Default(0), is, 0, content(subject, is.ID, m.version+1))
				if allowed && got == nil {
					m.version++
				}
			case 2:
				op = "send at " + at.Format(time.RFC3339)
				allowed = m.editable()
				_, _, got = svc.Send(ctx, is, issues.When{At: at.Format(time.RFC3339)}, issues.SendOptions{})
				if allowed && got == nil {
					m.status, m.sendAt, m.localTime = store.IssueScheduled, at, ""
				}
			case 3:
				op = "send at " + local + " local"
				allowed = m.editable()
				_, _, got = svc.Send(ctx, is, issues.When{LocalTime: local}, issues.SendOptions{})
				if allowed && got == nil {
					// Scheduled until the first reader's hour.
					m.status, m.localTime, m.sendAt, m.planned = store.IssueScheduled, local, time.Time{}, now
				}
			case 4:
				op = "send now"
				allowed = m.editable()
				_, _, got = svc.Send(ctx, is, issues.When{}, issues.SendOptions{})
				if allowed && got == nil {
					m.localTime, m.sendAt = "", time.Time{}
					m.begin(now)
				}
			case 5:
				op = "pause"
				allowed = m.status == store.IssueScheduled || m.status == store.IssueSending
				_, got = svc.Pause(ctx, is)
				if allowed && got == nil {
					m.pausedFrom, m.status = m.status, store.IssuePaused
				}
			case 6:
				op = "resume"
				allowed = m.status == store.IssuePaused
				_, got = svc.Resume(ctx, is)
				if allowed && got == nil {
					m.status, m.pausedFrom = m.pausedFrom, ""
					if m.status == store.IssueScheduled && m.localTime != "" {
						m.planned = now // planned again from now
					}
				}
			case 7:
				op = "reschedule at " + at.Format(time.RFC3339)
				allowed = m.scheduledOrPausedScheduled()
				_, got = svc.Reschedule(ctx, is, issues.When{At: at.Format(time.RFC3339)})
				if allowed && got == nil {
					m.status, m.pausedFrom, m.sendAt, m.localTime = store.IssueScheduled, "", at, ""
				}
			case 8:
				op = "unschedule"
				allowed = m.scheduledOrPausedScheduled()
				_, got = svc.Unschedule(ctx, is)
				if allowed && got == nil {
					m.status, m.pausedFrom, m.sendAt, m.localTime = store.IssueDraft, "", time.Time{}, ""
				}
			case 9:
				op = "cancel"
				allowed = m.status != store.IssueSent && m.status != store.IssueCancelled
				_, got = svc.Cancel(ctx, is)
				if allowed && got == nil {
					m.status = store.IssueCancelled
				}
			case 10:
				op = "restart the worker"
				allowed = true
				stop()
				stop = d.startWorker(t, 100000, 4)
			default:
				step := time.Duration(1+rng.IntN(8*60)) * time.Minute
				op = "clock +" + step.String()
				allowed = true
				clock.Set(avoidRound(now.Add(step)))
			}
			step += ": " + op
			if allowed && got != nil {
				t.Fatalf("%s: refused (%v), the model allows it (%+v)", step, got, *m)
			}
			if !allowed && !errors.Is(got, store.ErrIssueState) {
				t.Fatalf("%s: %v, want a refusal naming the status (model %+v)", step, got, *m)
			}
			if m.status == store.IssueCancelled && m.cancelledWith < 0 {
				m.cancelledWith = total(received[is.ID])
			}
			runDue()
			// A scheduled issue whose time came began sending with the
			// version it had then.
			// A local-hour send began with its first reader's hour.
			if m.status == store.IssueScheduled && m.localTime == "" && !m.sendAt.After(clock.Now()) {
				m.begin(clock.Now())
			}
			if m.status == store.IssueScheduled && m.localTime != "" && !firstLocal(t, m, zoneOf, d.zone).After(clock.Now()) {
				m.begin(clock.Now())
			}
			check(step, models, subjects)
		}
		// The end of an episode: whatever is sending reaches everyone
		// within two days, once; whatever waits is cancelled, so it
		// cannot begin unseen by the model in a later episode.
		if m.status == store.IssueDraft || m.status == store.IssueScheduled || m.status == store.IssuePaused {
			if is, err = d.store.Issue(ctx, is.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Cancel(ctx, is); err != nil {
				t.Fatal(err)
			}
			m.status, m.cancelledWith = store.IssueCancelled, total(received[is.ID])
		}
		if m.status == store.IssueSending {
			clock.Set(avoidRound(clock.Now().Add(49 * time.Hour)))
			runDue()
			check(fmt.Sprintf("episode %d: the end", episode), models, subjects)
			for _, e := range readers {
				if n := received[is.ID][e]; n != 1 {
					t.Fatalf("episode %d: %s got the issue %d times, want 1 (model %+v)", episode, e, n, *m)
				}
			}
			p := d.waitIssueSent(t, is.ID)
			if p.Sent != int64(len(readers)) {
				t.Fatalf("episode %d: progress %+v, want %d sent", episode, p, len(readers))
			}
		}
	}
	t.Logf("%d episodes, %d steps, %d mails", episode, steps, len(d.smtp.Messages()))
}

// marker is the text of version v of issue id: every mail of the issue
// must carry the one of the version it began sending with.
func marker(id int64, v int) string { return fmt.Sprintf("marker-i%d-v%d-end", id, v) }

func content(subject string, id int64, v int) store.IssueContent {
	return store.IssueContent{Subject: subject, Body: "Version " + marker(id, v) + ".", Topics: []string{topics.Updates}}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// firstLocal is the first reader's hour of the local-hour send m.
func firstLocal(t *testing.T, m *issueModel, zoneOf map[string]string, def *time.Location) time.Time {
	t.Helper()
	var first time.Time
	for _, zone := range zoneOf {
		due, err := worker.LocalDue(m.planned, m.localTime, zone, def)
		if err != nil {
			t.Fatal(err)
		}
		if first.IsZero() || due.Before(first) {
			first = due
		}
	}
	return first
}

// avoidRound moves t off a whole multiple of 100,000 s (see the test).
func avoidRound(t time.Time) time.Time {
	if t.Unix()%100000 == 0 {
		return t.Add(time.Second)
	}
	return t
}
