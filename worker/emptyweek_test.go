package worker

import (
	"context"
	"errors"
	"testing"

	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// TestEmptyWeekSendsNothing is what docs/publishing.md says of a week without
// items: the run is recorded as empty, makes no issue and queues nothing;
// that period is then done, so an item added later waits for the next
// run, which takes it (here a second period named by hand) and sends it
// as its issue.
func TestEmptyWeekSendsNothing(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	seed(t, d.store, "e", 30)
	render, err := mailer.NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	planner := NewHandlers(Deps{Store: d.store, Render: render, Log: discard, Queue: d.client, DigestBatch: 50}).Planner
	queued := func() int {
		t.Helper()
		info, err := d.insp.GetQueueInfo(tasks.QueueCritical)
		if err != nil {
			return 0 // the queue does not exist yet: nothing was ever enqueued to it
		}
		return info.Pending
	}
	noIssue := func(period string) {
		t.Helper()
		if is, err := d.store.IssueBySlug(ctx, "digest-"+period); !errors.Is(err, store.ErrNoIssue) {
			t.Fatalf("the empty week %s made an issue: %+v %v", period, is, err)
		}
	}

	if err := runTask(ctx, tasks.DigestPlan, planner.HandleDigestPlan, tasks.NewDigestPlan("2026-W49")); err != nil {
		t.Fatal(err)
	}
	run, err := d.store.DigestRun(ctx, "2026-W49")
	if err != nil || run.State != store.RunEmpty || run.Planned != 0 || run.Issue != 0 || queued() != 0 {
		t.Fatalf("an empty week: %+v %v, %d tasks queued", run, err, queued())
	}
	noIssue("2026-w49")

	d.store.AddItem(ctx, store.Item{Title: "Late", URL: "https://example.com/late"})
	if err := runTask(ctx, tasks.DigestPlan, planner.HandleDigestPlan, tasks.NewDigestPlan("2026-W49")); err != nil {
		t.Fatal(err)
	}
	if run, _ := d.store.DigestRun(ctx, "2026-W49"); run.State != store.RunEmpty || run.Issue != 0 || queued() != 0 {
		t.Fatalf("the empty period ran again: %+v, %d tasks", run, queued())
	}
	noIssue("2026-w49")

	if err := runTask(ctx, tasks.DigestPlan, planner.HandleDigestPlan, tasks.NewDigestPlan("2026-W49b")); err != nil {
		t.Fatal(err)
	}
	run, err = d.store.DigestRun(ctx, "2026-W49b")
	is, ierr := d.store.IssueBySlug(ctx, "digest-2026-w49b")
	if err != nil || ierr != nil || run.State != store.RunPlanning || len(run.Items) != 1 || run.Items[0].Title != "Late" ||
		run.Issue != is.ID || is.Status != store.IssueSending || queued() != 1 {
		t.Fatalf("the next run: %+v %v, its issue %+v %v, %d tasks", run, err, is, ierr, queued())
	}
}
