package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/robfig/cron/v3"

	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker/schedule"
)

// seed adds n active subscribers a0000@… and returns their addresses.
func seed(t *testing.T, s *store.Redis, prefix string, n int, opts ...func(*store.SubscribeRequest)) []string {
	t.Helper()
	reqs := make([]store.SubscribeRequest, n)
	emails := make([]string, n)
	for i := range reqs {
		emails[i] = fmt.Sprintf("%s%04d@example.org", prefix, i)
		reqs[i] = store.SubscribeRequest{Email: emails[i], Activate: true, OnlyNew: true}
		for _, o := range opts {
			o(&reqs[i])
		}
	}
	errs, err := s.SubscribeMany(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return emails
}

func (d *delivery) waitRun(t *testing.T, period string, sent int64) {
	t.Helper()
	poll.Until(t, poll.BusyMachine, func() error {
		run, _ := d.store.DigestRun(context.Background(), period)
		if run.State == store.RunPlanned && run.Sent >= sent {
			return nil
		}
		q, _ := d.insp.GetQueueInfo(tasks.QueueCritical)
		var retrying []string
		retry, _ := d.insp.ListRetryTasks(tasks.QueueCritical)
		for _, r := range retry {
			retrying = append(retrying, r.ID+": "+r.LastErr)
		}
		return fmt.Errorf("digest %s: %+v; critical queue %+v; smtp got %d; retrying: %q", period, run, q, len(d.smtp.Messages()), retrying)
	})
}

// exactlyOnce asserts every address got exactly one mail. It reads the
// server's messages once (smtp.To per address copies them all per
// address: thousands squared under the race detector).
func (d *delivery) exactlyOnce(t *testing.T, emails []string) {
	t.Helper()
	got := map[string]int{}
	for _, m := range d.smtp.Messages() {
		for _, to := range m.To {
			got[strings.ToLower(to)]++
		}
	}
	for _, e := range emails {
		if n := got[strings.ToLower(e)]; n != 1 {
			t.Fatalf("%s got %d digests, want 1", e, n)
		}
	}
}

func TestDigestToActiveSubscribersOnly(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	active := seed(t, d.store, "a", 1000)
	for _, e := range seed(t, d.store, "u", 50) {
		d.store.Unsubscribe(ctx, e)
	}
	for _, e := range seed(t, d.store, "b", 20) {
		d.store.MarkBounced(ctx, e)
	}
	d.store.AddItem(ctx, store.Item{Title: "Release 2.0", URL: "https://example.com/2.0", Summary: "It is out."})
	d.startWorker(t, 100000, 8)

	if dup, err := tasks.EnqueueDigestPlan(ctx, d.client, "2026-W49"); dup || err != nil {
		t.Fatal(dup, err)
	}
	d.waitRun(t, "2026-W49", 1000)
	run, _ := d.store.DigestRun(ctx, "2026-W49")
	msgs := d.smtp.WaitFor(t, 1000, poll.BusyMachine)
	d.exactlyOnce(t, active)
	if len(msgs) != 1000 || run.Planned != 1000 || run.Audience != 1000 || run.Sent != 1000 || run.Failed != 0 {
		t.Fatalf("%d mails; run %+v", len(msgs), run)
	}
	m := msgs[0]
	if !strings.Contains(m.Header.Get("Subject"), "2026-W49") || !strings.Contains(m.Text(), "Release 2.0") ||
		m.Header.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" || !strings.Contains(m.Header.Get("List-Unsubscribe"), "/unsubscribe?token=") ||
		!strings.Contains(m.Text(), "/preferences?token=") {
		t.Fatalf("digest mail:\n%s", m.Data)
	}
	// One batch task per page of 50, over one connection each.
	if s := d.smtp.Sessions(); s > 8*2 {
		t.Fatalf("%d SMTP connections for 20 batches on 8 workers", s)
	}

	// The same period again, by the scheduler or by hand: nothing more.
	poll.True(t, poll.BusyMachine, "queue drained", func() bool {
		info, err := d.insp.GetQueueInfo(tasks.QueueCritical)
		return err == nil && info.Size == 0
	})
	tasks.EnqueueDigestPlan(ctx, d.client, "2026-W49")
	poll.True(t, poll.BusyMachine, "second plan done", func() bool {
		info, _ := d.insp.GetQueueInfo(tasks.QueueCritical)
		return info.Size == 0
	})
	if n := len(d.smtp.Messages()); n != 1000 {
		t.Fatalf("running the period again sent %d more", n-1000)
	}
}

// cuttingQueue lets the planner enqueue `allow` tasks, then fails as if
// the process died: once before the enqueue, once right after it (before
// the cursor was saved).
type cuttingQueue struct {
	tasks.Enqueuer
	mu         sync.Mutex
	allow      int
	afterwards bool
}

var errKilled = errors.New("planner killed")

func (q *cuttingQueue) EnqueueContext(ctx context.Context, t *asynq.Task, o ...asynq.Option) (*asynq.TaskInfo, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.allow == 0 {
		if q.afterwards {
			q.Enqueuer.EnqueueContext(ctx, t, o...)
		}
		return nil, errKilled
	}
	q.allow--
	return q.Enqueuer.EnqueueContext(ctx, t, o...)
}

// digestIssue starts period's run and makes and sends its issue as the
// digest's planner does, without queueing the issue's plan: the plan the
// test runs itself is the task that planner queues.
func digestIssue(t *testing.T, st *store.Redis, period string) (*asynq.Task, store.Issue) {
	t.Helper()
	ctx := context.Background()
	run, _, err := st.StartDigestRun(ctx, period)
	if err != nil || run.State != store.RunPlanning {
		t.Fatalf("run %+v %v", run, err)
	}
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	subject, body, err := render.DigestIssue(period, entriesOf(run.Items))
	if err != nil {
		t.Fatal(err)
	}
	is, err := st.DigestIssue(ctx, period, store.IssueContent{Subject: subject, Body: body, Topics: []string{topics.Digest}})
	if err != nil {
		t.Fatal(err)
	}
	if is, err = st.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending, store.IssueChange{Round: is.Round}); err != nil {
		t.Fatal(err)
	}
	return tasks.NewIssuePlan(is.ID, is.Round, time.Now()).Task, is
}

// TestPlannerKilledHalfwayResumes: the digest's issue planner killed
// after three tasks (its push fan-out and two batches), before or right
// after an enqueue, resumes at its saved cursor when retried: each reader
// gets the digest once, and a page planned twice counts once.
func TestPlannerKilledHalfwayResumes(t *testing.T) {
	for _, afterEnqueue := range []bool{false, true} {
		t.Run(fmt.Sprintf("killed after enqueue %v", afterEnqueue), func(t *testing.T) {
			d := newDelivery(t)
			ctx := context.Background()
			emails := seed(t, d.store, "k", 500)
			d.store.AddItem(ctx, store.Item{Title: "News", URL: "https://example.com/n"})
			plan, is := digestIssue(t, d.store, "2026-W50")
			d.startWorker(t, 100000, 4)

			render, _ := mailer.NewRenderer("")
			sender := NewHandlers(Deps{Store: d.store, Render: render, Log: discard, Links: newHandlersLinks(),
				Queue: &cuttingQueue{Enqueuer: d.client, allow: 3, afterwards: afterEnqueue}, DigestBatch: 50}).Issues
			if err := runTask(ctx, tasks.IssuePlan, sender.HandleIssuePlan, plan); !errors.Is(err, errKilled) {
				t.Fatalf("first planner: %v", err)
			}
			if p, _ := d.store.IssueProgress(ctx, is.ID); p.PlanDone || p.Planned != 100 {
				t.Fatalf("after the kill: %+v", p)
			}
			// A new planner (the retry) picks up at the saved cursor.
			sender.Queue = d.client
			if err := runTask(ctx, tasks.IssuePlan, sender.HandleIssuePlan, plan); err != nil {
				t.Fatal(err)
			}
			d.waitRun(t, "2026-W50", 500)
			d.smtp.WaitFor(t, 500, poll.BusyMachine)
			d.exactlyOnce(t, emails)
			if run, _ := d.store.DigestRun(ctx, "2026-W50"); run.Planned != 500 {
				t.Fatalf("planned %d, want 500 (a re-planned page counted twice?)", run.Planned)
			}
		})
	}
}

func TestTwoSchedulersOnePlan(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	emails := seed(t, d.store, "s", 120)
	d.store.AddItem(ctx, store.Item{Title: "News", URL: "https://example.com/n"})
	fixed := func() time.Time { return time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC) }
	spec, err := cron.ParseStandard("0 9 * * 1")
	if err != nil {
		t.Fatal(err)
	}
	scheds := []*schedule.Scheduler{
		{Schedule: spec, Queue: d.client, Log: discard, Now: fixed},
		{Schedule: spec, Queue: d.client, Log: discard, Now: fixed},
	}
	for _, s := range scheds {
		s.Start()
		defer s.Stop()
	}
	// Both replicas fire at the same cron tick.
	var wg sync.WaitGroup
	for _, s := range scheds {
		wg.Add(1)
		go func() { defer wg.Done(); s.Fire() }()
	}
	wg.Wait()
	if info, err := d.insp.GetQueueInfo(tasks.QueueCritical); err != nil || info.Size != 1 {
		t.Fatalf("two schedulers queued %v plan tasks (%v)", info, err)
	}
	d.startWorker(t, 100000, 4)
	d.waitRun(t, "2026-W50", 120)
	d.smtp.WaitFor(t, 120, poll.BusyMachine)
	// A replica whose clock lags fires after the plan finished.
	scheds[1].Fire()
	poll.True(t, poll.BusyMachine, "late plan done", func() bool {
		info, _ := d.insp.GetQueueInfo(tasks.QueueCritical)
		return info.Size == 0
	})
	d.exactlyOnce(t, emails)
	if n := len(d.smtp.Messages()); n != 120 {
		t.Fatalf("%d mails for 120 subscribers", n)
	}
}

// TestBackPressureBoundsQueuedBatches: the digest's issue planner stops
// at the limit of waiting batches, not after the whole audience, and
// hands itself back with its cursor saved.
func TestBackPressureBoundsQueuedBatches(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	seed(t, d.store, "p", 600)
	d.store.AddItem(ctx, store.Item{Title: "News", URL: "https://example.com/n"})
	plan, is := digestIssue(t, d.store, "bp")

	// No worker is running: the planner must stop at the limit, not
	// enqueue the whole audience. (The push fan-out it queues first is
	// in the e-mail lane's default queue, not counted here.)
	sender := NewHandlers(Deps{Store: d.store, Log: discard, Queue: d.client, Depth: RedisQueueDepth{Redis: d.rdb},
		Links: newHandlersLinks(), DigestBatch: 50, MaxPendingBatches: 4}).Issues
	tctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	err := runTask(tctx, tasks.IssuePlan, sender.HandleIssuePlan, plan)
	var def *Deferred
	if !errors.As(err, &def) {
		t.Fatalf("planner with a full queue: %v", err)
	}
	info, _ := d.insp.GetQueueInfo(tasks.QueueCritical)
	if info.Pending != 4 {
		t.Fatalf("%d batches queued, want the limit of 4", info.Pending)
	}
	if p, _ := d.store.IssueProgress(ctx, is.ID); p.Planned != 200 || p.Cursor == 0 || p.PlanDone {
		t.Fatalf("cursor not saved: %+v", p)
	}
}

// issueBatch is the batch of the issue's readers ids, due now.
func issueBatch(is store.Issue, ids ...int64) *asynq.Task {
	return tasks.NewIssueBatch(is.ID, is.Round, ids, time.Now(), false)
}

// TestDigestSkipsWhoLeftAfterPlanning: a reader who left between the plan
// and their batch is skipped and counted so; a batch run twice sends
// nobody twice.
func TestDigestSkipsWhoLeftAfterPlanning(t *testing.T) {
	h, st, rec := newHandlers(t)
	ctx := context.Background()
	a, b := activate(t, st, "stay@x.org"), activate(t, st, "leave@x.org")
	st.AddItem(ctx, store.Item{Title: "T", URL: "https://x/t"})
	_, is := digestIssue(t, st, "p1")
	st.Unsubscribe(ctx, "leave@x.org")
	if err := runTask(ctx, tasks.IssueEmail, h.Issues.HandleIssueBatch, issueBatch(is, a.ID, b.ID)); err != nil {
		t.Fatal(err)
	}
	// Twice, as a retried batch would run.
	runTask(ctx, tasks.IssueEmail, h.Issues.HandleIssueBatch, issueBatch(is, a.ID, b.ID))
	run, _ := st.DigestRun(ctx, "p1")
	if rec.count() != 1 || rec.sent[0].To != "stay@x.org" || run.Sent != 1 || run.Skipped != 1 {
		t.Fatalf("%d mails, run %+v", rec.count(), run)
	}
}

// TestQuietHoursDeferDigestToMorning: a reader inside quiet hours is held
// in a batch of their own due when the hours end, then sent.
func TestQuietHoursDeferDigestToMorning(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	berlin, _ := time.LoadLocation("Europe/Berlin")
	night := time.Date(2026, 12, 7, 23, 0, 0, 0, berlin)
	seed(t, d.store, "night", 1, func(r *store.SubscribeRequest) { r.Timezone = "Europe/Berlin" })
	seed(t, d.store, "utc", 1) // no time zone: not held
	d.store.AddItem(ctx, store.Item{Title: "T", URL: "https://x/t"})
	_, is := digestIssue(t, d.store, "q1")
	window, _ := quiet.Parse("22:00-08:00")
	render, _ := mailer.NewRenderer("")
	rec := &recorder{}
	clock := night
	h := NewHandlers(Deps{Store: d.store, Mailer: rec, Render: render, Log: discard, Queue: d.client, Quiet: quiet.New(&window),
		Links: newHandlersLinks(), Now: func() time.Time { return clock }})
	ids, _ := d.store.AudienceAfter(ctx, "", 0, 10)
	if err := runTask(ctx, tasks.IssueEmail, h.Issues.HandleIssueBatch, issueBatch(is, ids...)); err != nil {
		t.Fatal(err)
	}
	if rec.count() != 1 || rec.sent[0].To != "utc0000@example.org" {
		t.Fatalf("at 23:00 Berlin: %d mails %v", rec.count(), rec.sent)
	}
	held, err := d.insp.ListScheduledTasks(tasks.QueueCritical)
	if err != nil || len(held) != 1 {
		t.Fatalf("deferred batches: %v %v", held, err)
	}
	morning := time.Date(2026, 12, 8, 8, 0, 0, 0, berlin)
	if !held[0].NextProcessAt.Equal(morning) {
		t.Fatalf("deferred to %s, want 08:00 Berlin (%s)", held[0].NextProcessAt.In(berlin), morning)
	}
	// At 08:00 local the deferred batch sends.
	clock = morning
	if err := runTask(ctx, tasks.IssueEmail, h.Issues.HandleIssueBatch, asynq.NewTask(held[0].Type, held[0].Payload)); err != nil {
		t.Fatal(err)
	}
	if rec.count() != 2 || rec.sent[1].To != "night0000@example.org" {
		t.Fatalf("at 08:00 Berlin: %d mails", rec.count())
	}
	if run, _ := d.store.DigestRun(ctx, "q1"); run.Sent != 2 {
		t.Fatalf("run %+v", run)
	}
}

// TestDigestTemplateErrorFailsWithoutRetry: a template that cannot render
// cannot be fixed by a retry; the recipient counts as failed and the batch
// is done, as for a single mail.
func TestDigestTemplateErrorFailsWithoutRetry(t *testing.T) {
	h, st, rec := newHandlers(t)
	ctx := context.Background()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "issue.txt"), []byte(`{{define "subject"}}News{{end}}{{.NoSuchField}}`), 0o644)
	render, err := mailer.NewRenderer(dir)
	if err != nil {
		t.Fatal(err)
	}
	h.Issues.Deliver.Render = render
	sub := activate(t, st, "a@x.org")
	st.AddItem(ctx, store.Item{Title: "T", URL: "https://x/t"})
	_, is := digestIssue(t, st, "p")
	if err := runTask(ctx, tasks.IssueEmail, h.Issues.HandleIssueBatch, issueBatch(is, sub.ID)); err != nil {
		t.Fatalf("a template error asked for a retry: %v", err)
	}
	run, _ := st.DigestRun(ctx, "p")
	if rec.count() != 0 || run.Failed != 1 || run.Sent != 0 {
		t.Fatalf("%d mails, run %+v", rec.count(), run)
	}
}

// TestOlderRunIsNotSentAgainAsAnIssue: a run an earlier version began (no
// as_issue: its readers are marked under the digest's marks) and left
// planning is not sent as an issue when its plan runs here: that would
// mail the week again to whoever its batches reached.
func TestOlderRunIsNotSentAgainAsAnIssue(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	seed(t, d.store, "older", 3)
	created := strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)
	if err := d.rdb.HSet(ctx, "nl:{pub}:digest:2026-W40", "items", "", "created", created, "audience", 3, "state", "planning").Err(); err != nil {
		t.Fatal(err)
	}
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	planner := NewHandlers(Deps{Store: d.store, Render: render, Queue: d.client, Log: discard}).Planner
	if err := runTask(ctx, tasks.DigestPlan, planner.HandleDigestPlan, tasks.NewDigestPlan("2026-W40")); err != nil {
		t.Fatal(err)
	}
	if is, err := d.store.IssueBySlug(ctx, "digest-2026-W40"); !errors.Is(err, store.ErrNoIssue) {
		t.Fatalf("the older run became issue %d (%v)", is.ID, err)
	}
	if q, err := asynq.NewInspectorFromRedisClient(d.rdb).GetQueueInfo(tasks.QueueCritical); err == nil && q.Size != 0 {
		t.Fatalf("%d tasks queued for the older run", q.Size)
	}
}
