package worker

import (
	"context"
	"testing"

	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// TestEmptyWeekSendsNothing is what docs/publishing.md says of a week without
// items: the run is recorded as empty and plans no batch; that period is
// then done, so an item added later waits for the next run, which takes
// it (here a second period named by hand).
func TestEmptyWeekSendsNothing(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	seed(t, d.store, "e", 30)
	planner := NewHandlers(Deps{Store: d.store, Log: discard, Queue: d.client, DigestBatch: 50}).Planner
	batches := func() int {
		t.Helper()
		info, err := d.insp.GetQueueInfo(tasks.QueueCritical)
		if err != nil {
			return 0 // the queue does not exist yet: nothing was ever enqueued to it
		}
		return info.Pending
	}

	if err := runTask(ctx, tasks.DigestPlan, planner.HandleDigestPlan, tasks.NewDigestPlan("2026-W49")); err != nil {
		t.Fatal(err)
	}
	run, err := d.store.DigestRun(ctx, "2026-W49")
	if err != nil || run.State != store.RunEmpty || run.Planned != 0 || batches() != 0 {
		t.Fatalf("an empty week: %+v %v, %d batches queued", run, err, batches())
	}

	d.store.AddItem(ctx, store.Item{Title: "Late", URL: "https://example.com/late"})
	if err := runTask(ctx, tasks.DigestPlan, planner.HandleDigestPlan, tasks.NewDigestPlan("2026-W49")); err != nil {
		t.Fatal(err)
	}
	if run, _ := d.store.DigestRun(ctx, "2026-W49"); run.State != store.RunEmpty || batches() != 0 {
		t.Fatalf("the empty period ran again: %+v, %d batches", run, batches())
	}

	if err := runTask(ctx, tasks.DigestPlan, planner.HandleDigestPlan, tasks.NewDigestPlan("2026-W49b")); err != nil {
		t.Fatal(err)
	}
	if run, _ := d.store.DigestRun(ctx, "2026-W49b"); run.State != store.RunPlanned || len(run.Items) != 1 || run.Planned != 30 || batches() != 1 {
		t.Fatalf("the next run: %+v, %d batches", run, batches())
	}
}
