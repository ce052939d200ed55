package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// batchRecorder is a queue that keeps the readers of every batch it is
// given.
type batchRecorder struct {
	tasks.Enqueuer
	mu      sync.Mutex
	batches [][]int64
}

func (q *batchRecorder) EnqueueContext(ctx context.Context, t *asynq.Task, o ...asynq.Option) (*asynq.TaskInfo, error) {
	if t.Type() == tasks.IssueEmail.Type {
		var p tasks.IssueBatchPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil {
			return nil, err
		}
		q.mu.Lock()
		q.batches = append(q.batches, p.IDs)
		q.mu.Unlock()
	}
	return q.Enqueuer.EnqueueContext(ctx, t, o...)
}

// TestIssueBatchesSitInFewShards: the planner walks shard by shard, so
// each shard's readers come in one run of batches and a batch touches one
// shard, or two where it crosses into the next; everyone is mailed once
// and counted once.
func TestIssueBatchesSitInFewShards(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	emails := seed(t, d.store, "w", 1500)
	d.store.AddItem(ctx, store.Item{Title: "News", URL: "https://example.com/n"})
	plan, is := digestIssue(t, d.store, "walk")
	d.startWorker(t, 100000, 4)
	render, _ := mailer.NewRenderer("")
	q := &batchRecorder{Enqueuer: d.client}
	sender := NewHandlers(Deps{Store: d.store, Render: render, Log: discard, Links: newHandlersLinks(),
		Queue: q, DigestBatch: 20}).Issues
	if err := runTask(ctx, tasks.IssuePlan, sender.HandleIssuePlan, plan); err != nil {
		t.Fatal(err)
	}
	d.waitRun(t, "walk", 1500)
	d.smtp.WaitFor(t, 1500, poll.BusyMachine)
	d.exactlyOnce(t, emails)
	touched := 0
	for _, b := range q.batches {
		shards := map[int64]bool{}
		for _, id := range b {
			shards[id%store.Shards] = true
		}
		touched += len(shards)
	}
	// 1,500 readers over 64 shards are about 23 a shard: batches of 20
	// in id order would touch nearly 20 shards each.
	if touched > len(q.batches)+store.Shards-1 {
		t.Fatalf("%d batches touched %d shards: a shard's readers are not in one run", len(q.batches), touched)
	}
	p, err := d.store.IssueProgress(ctx, is.ID)
	if err != nil || p.Planned != 1500 || p.Walk != store.WalkByShard {
		t.Fatalf("progress %+v %v", p, err)
	}
}

// TestIssueBeganInIDOrderWalksOnInIt: an issue an earlier release began
// to plan in id order (its cursor an id; no order kept, which WalkOf
// reads as id order) is walked on in id order: nobody is left out,
// nobody mailed twice, and planned counts each reader once, so the issue
// ends.
func TestIssueBeganInIDOrderWalksOnInIt(t *testing.T) {
	if w := (store.IssueProgress{MaxCursor: 7}).WalkOf(); w != store.WalkByID {
		t.Fatalf("an issue planned in part without an order walks %q", w)
	}
	if w := (store.IssueProgress{}).WalkOf(); w != store.WalkByShard {
		t.Fatalf("an issue not planned walks %q", w)
	}
	d := newDelivery(t)
	ctx := context.Background()
	emails := seed(t, d.store, "o", 300)
	d.store.AddItem(ctx, store.Item{Title: "News", URL: "https://example.com/n"})
	plan, is := digestIssue(t, d.store, "old")
	// The earlier release's planner: the first 100 readers in id order,
	// queued and counted, its cursor an id.
	first, err := d.store.AudienceAfter(ctx, "digest", 0, 100)
	if err != nil || len(first) != 100 {
		t.Fatalf("%d readers %v", len(first), err)
	}
	if _, err := d.client.EnqueueContext(ctx, tasks.NewIssueBatch(is.ID, is.Round, first, time.Now(), false)); err != nil {
		t.Fatal(err)
	}
	if err := d.store.AdvanceIssuePlan(ctx, is.ID, is.Round, store.WalkByID, first[99], 100, false); err != nil {
		t.Fatal(err)
	}
	d.startWorker(t, 100000, 4)
	render, _ := mailer.NewRenderer("")
	sender := NewHandlers(Deps{Store: d.store, Render: render, Log: discard, Links: newHandlersLinks(),
		Queue: d.client, DigestBatch: 50}).Issues
	if err := runTask(ctx, tasks.IssuePlan, sender.HandleIssuePlan, plan); err != nil {
		t.Fatal(err)
	}
	d.waitRun(t, "old", 300)
	d.smtp.WaitFor(t, 300, poll.BusyMachine)
	d.exactlyOnce(t, emails)
	// The last batch marks the issue sent just after its counts reach 300.
	poll.Until(t, poll.BusyMachine, func() error {
		p, err := d.store.IssueProgress(ctx, is.ID)
		if err != nil || p.Planned != 300 || p.Walk != store.WalkByID || p.Status != store.IssueSent {
			return fmt.Errorf("progress %+v %v", p, err)
		}
		return nil
	})
}
