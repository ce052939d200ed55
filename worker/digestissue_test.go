package worker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// idle waits until the critical queue (plans and batches) holds nothing
// waiting, running or to retry.
func (d *delivery) idle(t *testing.T) {
	t.Helper()
	poll.Until(t, poll.BusyMachine, func() error {
		q, err := d.insp.GetQueueInfo(tasks.QueueCritical)
		if err != nil {
			return err
		}
		if n := q.Pending + q.Active + q.Scheduled + q.Retry; n > 0 {
			return fmt.Errorf("critical queue: %+v", q)
		}
		return nil
	})
}

// mailsTo counts the mails each address got, reading the server once.
func (d *delivery) mailsTo() map[string]int {
	got := map[string]int{}
	for _, m := range d.smtp.Messages() {
		for _, to := range m.To {
			got[strings.ToLower(to)]++
		}
	}
	return got
}

// TestDigestIsAnIssue: the weekly digest run, over real Redis and SMTP,
// makes the issue digest-<period> from the week's items and sends it the
// issue's way: each reader of the digest topic once, nobody else; the
// issue is sent (so in the archive), its progress and the run's agree,
// and the mails count as digest mail. Running the period again sends
// nothing; a run that died between making its issue and sending it sends
// it once when run again; an empty week makes no issue and sends nothing.
func TestDigestIsAnIssue(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	only := func(ts ...string) func(*store.SubscribeRequest) {
		return func(r *store.SubscribeRequest) { r.Topics = ts }
	}
	readers := seed(t, d.store, "d", 80, only(topics.Digest))
	others := seed(t, d.store, "u", 20, only(topics.Updates))
	if _, err := d.store.AddItem(ctx, store.Item{Title: "Release *2.0*", URL: "https://example.com/2.0", Summary: "It is out."}); err != nil {
		t.Fatal(err)
	}
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	// A planner of its own, wired as the worker's is, to run the period
	// again by hand.
	planner := NewHandlers(Deps{Store: d.store, Render: render, Queue: d.client, Log: discard, Links: newHandlersLinks()}).Planner
	d.startWorker(t, 100000, 4)

	if dup, err := tasks.EnqueueDigestPlan(ctx, d.client, "2026-W49"); dup || err != nil {
		t.Fatal(dup, err)
	}
	d.waitRun(t, "2026-W49", 80)
	is, err := d.store.IssueBySlug(ctx, "digest-2026-w49")
	if err != nil || is.Period != "2026-W49" || !slices.Equal(is.Topics, []string{topics.Digest}) || is.Subject != "What is new (2026-W49)" {
		t.Fatalf("the digest's issue: %+v %v", is, err)
	}
	p := d.waitIssueSent(t, is.ID)
	if p.Planned != 80 || p.Sent != 80 || p.Skipped != 0 || p.Failed != 0 {
		t.Fatalf("issue progress %+v", p)
	}
	run, err := d.store.DigestRun(ctx, "2026-W49")
	if err != nil || run.Issue != is.ID || run.Sent != 80 || run.Planned != 80 || run.Audience != 80 || run.State != store.RunPlanned {
		t.Fatalf("run %+v %v", run, err)
	}
	d.exactlyOnce(t, readers)
	got := d.mailsTo()
	for _, e := range others {
		if got[e] != 0 {
			t.Fatalf("%s (updates only) got the digest", e)
		}
	}
	m := d.smtp.To(readers[0])[0]
	if m.Header.Get("Subject") != "What is new (2026-W49)" || !strings.Contains(m.Text(), "Release *2.0* [1]") ||
		!strings.Contains(m.Text(), "View in the browser: https://news.example.com/archive/digest-2026-w49") ||
		!strings.Contains(m.HTML(), `<a href="https://example.com/2.0">Release *2.0*</a>`) ||
		m.Header.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" {
		t.Fatalf("digest mail:\n%s", m.Data)
	}
	if sent, issue := testutil.ToFloat64(d.metrics.Sent.WithLabelValues(mailer.KindDigest)), testutil.ToFloat64(d.metrics.Sent.WithLabelValues(mailer.KindIssue)); sent != 80 || issue != 0 {
		t.Fatalf("newsletter_emails_sent_total: digest %v, issue %v; want 80 and 0", sent, issue)
	}
	if archived, err := d.store.SentIssues(ctx, topics.Digest, 0, 10); err != nil || len(archived) != 1 || archived[0].ID != is.ID {
		t.Fatalf("sent issues %+v %v", archived, err)
	}

	// The period again, through the queue and by hand: nothing more.
	d.idle(t)
	if _, err := tasks.EnqueueDigestPlan(ctx, d.client, "2026-W49"); err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.DigestPlan, planner.HandleDigestPlan, tasks.NewDigestPlan("2026-W49")); err != nil {
		t.Fatal(err)
	}
	d.idle(t)
	if n := len(d.smtp.Messages()); n != 80 {
		t.Fatalf("running the period again sent %d more", n-80)
	}

	// A run that died right after making its issue: the issue is there,
	// a draft, nobody planned. Run again, it is sent once.
	if _, err := d.store.AddItem(ctx, store.Item{Title: "Second week", URL: "https://example.com/w50"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.store.StartDigestRun(ctx, "2026-W50"); err != nil {
		t.Fatal(err)
	}
	draft, err := d.store.DigestIssue(ctx, "2026-W50", store.IssueContent{Subject: "What is new (2026-W50)", Body: "- Second week", Topics: []string{topics.Digest}})
	if err != nil || draft.Status != store.IssueDraft {
		t.Fatalf("%+v %v", draft, err)
	}
	if err := runTask(ctx, tasks.DigestPlan, planner.HandleDigestPlan, tasks.NewDigestPlan("2026-W50")); err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.DigestPlan, planner.HandleDigestPlan, tasks.NewDigestPlan("2026-W50")); err != nil {
		t.Fatal(err)
	}
	d.waitIssueSent(t, draft.ID)
	d.idle(t)
	got = d.mailsTo()
	for _, e := range readers {
		if got[e] != 2 {
			t.Fatalf("%s got %d mails for two weeks", e, got[e])
		}
	}

	// An empty week: no issue, no mail.
	if err := runTask(ctx, tasks.DigestPlan, planner.HandleDigestPlan, tasks.NewDigestPlan("2026-W51")); err != nil {
		t.Fatal(err)
	}
	if run, err := d.store.DigestRun(ctx, "2026-W51"); err != nil || run.State != store.RunEmpty || run.Issue != 0 {
		t.Fatalf("empty week: %+v %v", run, err)
	}
	if _, err := d.store.IssueBySlug(ctx, "digest-2026-w51"); err == nil {
		t.Fatal("an empty week made an issue")
	}
	if list, _ := d.store.ListIssues(ctx, "", 0, 10); len(list) != 2 {
		t.Fatalf("%d issues after two weeks and an empty one", len(list))
	}
	d.idle(t)
	if n := len(d.smtp.Messages()); n != 160 {
		t.Fatalf("%d mails, want 160", n)
	}
}

// TestIssueRenderedOncePerVersion: an issue's batches share one prepared
// mail per topic; its Markdown is rendered once per version, whatever the
// number of batches and topics.
func TestIssueRenderedOncePerVersion(t *testing.T) {
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(nil)
	h := NewHandlers(Deps{Render: render, Links: newHandlersLinks(), Metrics: m}).Issues
	renders := func() float64 { return testutil.ToFloat64(m.IssueRenders) }
	is := store.Issue{ID: 7, Slug: "s", Version: 1, IssueContent: store.IssueContent{Subject: "S", Body: "Hello **you**", Topics: []string{topics.Digest, topics.Updates}}}
	_, a, err := h.prepare(is, topics.Digest)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // three more batches of the same issue
		if _, again, _ := h.prepare(is, topics.Digest); again != a {
			t.Fatal("a batch prepared the issue again")
		}
	}
	data, b, err := h.prepare(is, topics.Updates)
	if err != nil || b == a || !strings.Contains(string(data.IssueHTML), "<strong>you</strong>") {
		t.Fatalf("the other topic's mail: %v %v", b == a, err)
	}
	if n := renders(); n != 1 {
		t.Fatalf("Markdown rendered %v times for one version, want 1", n)
	}
	is.Version, is.Body = 2, "Hello **again**"
	if data, _, _ := h.prepare(is, topics.Digest); !strings.Contains(string(data.IssueHTML), "again") || renders() != 2 {
		t.Fatalf("a new version: %q, %v renders", data.IssueHTML, renders())
	}
}
