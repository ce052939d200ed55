package worker

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// stepQueue records the steps a handler schedules.
type stepQueue struct {
	mu    sync.Mutex
	steps []queuedStep
}

type queuedStep struct {
	Step string // template; "" for the first step's task
	Due  time.Time
}

func (q *stepQueue) EnqueueContext(_ context.Context, t *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error) {
	var s queuedStep
	if t.Type() == tasks.TypeSequenceStep {
		var p tasks.StepPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil {
			return nil, err
		}
		s.Step = p.Step
	}
	for _, o := range opts {
		if o.Type() == asynq.ProcessAtOpt {
			s.Due = o.Value().(time.Time)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.steps = append(q.steps, s)
	return &asynq.TaskInfo{}, nil
}

// take returns and forgets what was scheduled.
func (q *stepQueue) take() []queuedStep {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.steps
	q.steps = nil
	return out
}

type sequenceEnv struct {
	h     Handlers
	st    *store.Redis
	rec   *recorder
	queue *stepQueue
	now   time.Time
	set   *topics.Set
}

func sequenceSet(t *testing.T, steps string) *topics.Set {
	t.Helper()
	set, err := topics.Parse([]byte("topics:\n- {id: digest, name: Weekly digest, default: true}\n- {id: updates, name: Updates, default: true}\nsequence:\n  topic: digest\n  steps:\n"+steps), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

const threeSteps = `  - {template: welcome, after: 1h}
  - {template: getting-started, after: 72h}
  - {template: best-of, after: 168h}
`

// confirmed is when the test's subscriber confirmed.
var confirmed = time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)

func newSequenceEnv(t *testing.T, set *topics.Set, q *quiet.Hours) *sequenceEnv {
	t.Helper()
	render, err := mailer.NewRenderer("", "welcome", "getting-started", "best-of")
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t).WithTopics(set).WithClock(func() time.Time { return confirmed })
	e := &sequenceEnv{st: st, rec: &recorder{}, queue: &stepQueue{}, now: confirmed, set: set}
	links := newHandlersLinks()
	links.Topics, links.ListID = set, "News <newsletter.example.com>"
	e.h = NewHandlers(Deps{
		Store: e.st, Mailer: e.rec, Render: render, Log: discard, Metrics: NewMetrics(nil).ForSteps(set.Templates()),
		Links: links, Queue: e.queue, Quiet: q, Now: func() time.Time { return e.now },
	})
	if _, err := e.st.Subscribe(context.Background(), store.SubscribeRequest{Email: "s@x.io", Activate: true, Timezone: "Europe/Berlin"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// use switches the topics file, as a restart with an edited file does.
func (e *sequenceEnv) use(set *topics.Set) {
	e.set = set
	e.h.Sequence.Links.Topics = set
}

func (e *sequenceEnv) run(t *testing.T, step string) error {
	t.Helper()
	if step == "" {
		return runTask(context.Background(), tasks.WelcomeEmail, e.h.Sequence.HandleWelcome, tasks.NewWelcomeAt("s@x.io", e.now).Task)
	}
	return runTask(context.Background(), tasks.SequenceStep, e.h.Sequence.HandleStep, tasks.NewStep("s@x.io", step, e.now).Task)
}

func (e *sequenceEnv) subjects() []string {
	e.rec.mu.Lock()
	defer e.rec.mu.Unlock()
	var out []string
	for _, m := range e.rec.sent {
		out = append(out, m.Kind)
	}
	return out
}

func wantQueued(t *testing.T, got []queuedStep, want ...queuedStep) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("scheduled %+v, want %+v", got, want)
	}
}

func TestSequenceStepsInOrder(t *testing.T) {
	e := newSequenceEnv(t, sequenceSet(t, threeSteps), nil)
	e.now = confirmed.Add(time.Hour)
	if err := e.run(t, ""); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, e.queue.take(), queuedStep{"getting-started", confirmed.Add(72 * time.Hour)})
	// Too early (an edited file, a clock): deferred, nothing sent.
	var d *Deferred
	if err := e.run(t, "getting-started"); !errors.As(err, &d) || d.In != 71*time.Hour {
		t.Fatalf("early step: %v", err)
	}
	e.now = confirmed.Add(72 * time.Hour)
	if err := e.run(t, "getting-started"); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, e.queue.take(), queuedStep{"best-of", confirmed.Add(168 * time.Hour)})
	// A retry of a step that was sent sends nothing and makes sure the
	// next one waits.
	if err := e.run(t, "getting-started"); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, e.queue.take(), queuedStep{"best-of", confirmed.Add(168 * time.Hour)})
	e.now = confirmed.Add(168 * time.Hour)
	if err := e.run(t, "best-of"); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, e.queue.take()) // the last step schedules nothing
	if got := e.subjects(); !slices.Equal(got, []string{"welcome", "getting-started", "best-of"}) {
		t.Fatalf("sent %v", got)
	}
	// Each step's mail belongs to the sequence's topic.
	m := e.rec.sent[1]
	if m.ListID != "Weekly digest <digest.newsletter.example.com>" || m.UnsubscribeURL == "" || !containsAll(m.Text, "Three things that help", "/preferences?token=") {
		t.Fatalf("step mail: %+v", m)
	}
	metrics := e.h.Metrics
	for _, step := range []string{"welcome", "getting-started", "best-of"} {
		if n := testutil.ToFloat64(metrics.Steps.WithLabelValues(step, StepSent)); n != 1 {
			t.Fatalf("%s sent counted %v times", step, n)
		}
		if n := testutil.ToFloat64(metrics.Sent.WithLabelValues(step)); n != 1 {
			t.Fatalf("%s: emails_sent_total %v", step, n)
		}
	}
}

// Editing the file: a step the person passed while waiting (added before
// the one they waited for) is skipped, not sent in a burst; a task of a
// removed step only schedules the step that is next.
func TestSequenceAddedAndRemovedSteps(t *testing.T) {
	twoSteps := sequenceSet(t, "  - {template: welcome, after: 1h}\n  - {template: best-of, after: 168h}\n")
	e := newSequenceEnv(t, twoSteps, nil)
	e.now = confirmed.Add(time.Hour)
	if err := e.run(t, ""); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, e.queue.take(), queuedStep{"best-of", confirmed.Add(168 * time.Hour)})
	// getting-started (72h) is added while best-of waits; without the
	// start-up reconcile (reconcile_test.go) the person reaches day 7
	// with day 3 behind them: best-of goes, getting-started does not.
	e.use(sequenceSet(t, threeSteps))
	e.now = confirmed.Add(168 * time.Hour)
	if err := e.run(t, "best-of"); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, e.queue.take())
	if got := e.subjects(); !slices.Equal(got, []string{"welcome", "best-of"}) {
		t.Fatalf("sent %v", got)
	}

	// Removed: a task of a step the file no longer has schedules what
	// is next instead, and sends nothing.
	f := newSequenceEnv(t, sequenceSet(t, threeSteps), nil)
	f.now = confirmed.Add(time.Hour)
	if err := f.run(t, ""); err != nil {
		t.Fatal(err)
	}
	f.queue.take()
	f.use(sequenceSet(t, "  - {template: welcome, after: 1h}\n  - {template: final, after: 200h}\n"))
	f.now = confirmed.Add(72 * time.Hour)
	if err := f.run(t, "getting-started"); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, f.queue.take(), queuedStep{"final", confirmed.Add(200 * time.Hour)})
	if n := f.rec.count(); n != 1 {
		t.Fatalf("%d mails", n)
	}
	if n := testutil.ToFloat64(f.h.Metrics.Steps.WithLabelValues("getting-started", StepSuperseded)); n != 1 {
		t.Fatalf("superseded counted %v", n)
	}
}

// The first step is never skipped: a welcome that runs after a later
// step's time (asynq's poll, an outage) still goes out, and before that
// step. A later step that is only late (seconds, minutes) goes too, in
// order; one the person passed (more than an hour past its time, the
// next one due) is skipped.
func TestSequenceLateWelcomeGoesFirst(t *testing.T) {
	// Welcome after 1s, getting-started after 3s, best-of after 5s;
	// asynq moved the welcome's task after all three times.
	e := newSequenceEnv(t, sequenceSet(t, "  - {template: welcome, after: 1s}\n  - {template: getting-started, after: 3s}\n  - {template: best-of, after: 5s}\n"), nil)
	e.now = confirmed.Add(10 * time.Second)
	if err := e.run(t, ""); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, e.queue.take(), queuedStep{"getting-started", e.now})
	if err := e.run(t, "getting-started"); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, e.queue.take(), queuedStep{"best-of", e.now})
	if err := e.run(t, "best-of"); err != nil {
		t.Fatal(err)
	}
	if got := e.subjects(); !slices.Equal(got, []string{"welcome", "getting-started", "best-of"}) {
		t.Fatalf("sent %v", got)
	}

	// An outage longer than the gap between the first two steps, with
	// real delays: the welcome, then the second step at once, then the
	// third at its time.
	f := newSequenceEnv(t, sequenceSet(t, threeSteps), nil)
	f.now = confirmed.Add(73 * time.Hour)
	if err := f.run(t, ""); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, f.queue.take(), queuedStep{"getting-started", f.now})
	if err := f.run(t, "getting-started"); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, f.queue.take(), queuedStep{"best-of", confirmed.Add(168 * time.Hour)})
	if got := f.subjects(); !slices.Equal(got, []string{"welcome", "getting-started"}) {
		t.Fatalf("sent %v", got)
	}

	// Past every step: the welcome, then only the latest of the others
	// (the ones between were passed).
	g := newSequenceEnv(t, sequenceSet(t, threeSteps), nil)
	g.now = confirmed.Add(200 * time.Hour)
	if err := g.run(t, ""); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, g.queue.take(), queuedStep{"getting-started", g.now})
	if err := g.run(t, "getting-started"); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, g.queue.take())
	if got := g.subjects(); !slices.Equal(got, []string{"welcome", "best-of"}) {
		t.Fatalf("sent %v", got)
	}

	// A later step's task that runs while the welcome is still unsent
	// (its task was lost or archived) sends the welcome first, and comes
	// back for its own step rather than schedule itself under the TaskID
	// it holds.
	k := newSequenceEnv(t, sequenceSet(t, threeSteps), nil)
	k.now = confirmed.Add(72 * time.Hour)
	var d *Deferred
	if err := k.run(t, "getting-started"); !errors.As(err, &d) || d.In != time.Second {
		t.Fatalf("step after a late welcome: %v", err)
	}
	wantQueued(t, k.queue.take())
	if err := k.run(t, "getting-started"); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, k.queue.take(), queuedStep{"best-of", confirmed.Add(168 * time.Hour)})
	if got := k.subjects(); !slices.Equal(got, []string{"welcome", "getting-started"}) {
		t.Fatalf("sent %v", got)
	}
	if n := testutil.ToFloat64(k.h.Metrics.Steps.WithLabelValues("getting-started", StepSuperseded)); n != 0 {
		t.Fatalf("superseded counted %v for a step that went out", n)
	}
}

func TestSequenceStopsWhenTheTopicIsOff(t *testing.T) {
	e := newSequenceEnv(t, sequenceSet(t, threeSteps), nil)
	ctx := context.Background()
	e.now = confirmed.Add(time.Hour)
	if err := e.run(t, ""); err != nil {
		t.Fatal(err)
	}
	e.queue.take()
	if _, err := e.st.LeaveTopic(ctx, "s@x.io", "digest", outbox.Cancel{}); err != nil {
		t.Fatal(err)
	}
	e.now = confirmed.Add(72 * time.Hour)
	if err := e.run(t, "getting-started"); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, e.queue.take())
	if n := e.rec.count(); n != 1 {
		t.Fatalf("%d mails after the sequence's topic was turned off", n)
	}
	if n := testutil.ToFloat64(e.h.Metrics.Steps.WithLabelValues("getting-started", StepLeft)); n != 1 {
		t.Fatalf("left counted %v", n)
	}
	// Leaving everything: the same.
	if _, err := e.st.Unsubscribe(ctx, "s@x.io"); err != nil {
		t.Fatal(err)
	}
	if err := e.run(t, "getting-started"); err != nil || e.rec.count() != 1 {
		t.Fatalf("after leaving: %v, %d mails", err, e.rec.count())
	}
}

func TestSequenceRespectsQuietHours(t *testing.T) {
	q, err := quiet.Parse("22:00-08:00")
	if err != nil {
		t.Fatal(err)
	}
	e := newSequenceEnv(t, sequenceSet(t, threeSteps), quiet.New(&q))
	// 09:00 UTC + 1h is 11:00 in Berlin: fine. 72h later at 02:00
	// Berlin time is quiet.
	e.now = confirmed.Add(time.Hour)
	if err := e.run(t, ""); err != nil {
		t.Fatal(err)
	}
	e.queue.take()
	e.now = time.Date(2026, 12, 11, 1, 0, 0, 0, time.UTC) // 02:00 in Berlin
	var d *Deferred
	if err := e.run(t, "getting-started"); !errors.As(err, &d) || d.In != 6*time.Hour {
		t.Fatalf("inside quiet hours: %v", err)
	}
	if n := e.rec.count(); n != 1 {
		t.Fatalf("%d mails", n)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
