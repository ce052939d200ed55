package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/tasks"
)

// TestRedisQueueDepthAgreesWithAsynq holds RedisQueueDepth to asynq's own
// count: it reads asynq's pending list by name, which an asynq upgrade
// could rename.
func TestRedisQueueDepthAgreesWithAsynq(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	depth := RedisQueueDepth{Redis: d.rdb}
	if n, err := depth.Pending(ctx, tasks.QueueCritical); err != nil || n != 0 {
		t.Fatalf("an unused queue: %d %v", n, err)
	}
	for i := 0; i < 7; i++ {
		if _, err := d.client.EnqueueContext(ctx, tasks.NewIssueBatch(1, 1, []int64{int64(i + 1)}, time.Now(), false)); err != nil {
			t.Fatal(err)
		}
	}
	// And one scheduled, which is not pending.
	if _, err := d.client.EnqueueContext(ctx, tasks.NewDigestPlan("later"), asynq.ProcessIn(3600e9)); err != nil {
		t.Fatal(err)
	}
	info, err := d.insp.GetQueueInfo(tasks.QueueCritical)
	if err != nil {
		t.Fatal(err)
	}
	n, err := depth.Pending(ctx, tasks.QueueCritical)
	if err != nil || n != info.Pending || n != 7 {
		t.Fatal(fmt.Errorf("pending: ours %d (%v), asynq's %d, want 7", n, err, info.Pending))
	}
}

// failingDepth answers as Redis does to a call whose context has ended.
type failingDepth struct{}

func (failingDepth) Pending(ctx context.Context, _ string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("redis: connection refused")
}

// TestBackPressureHandsThePlannerBackWhenItsTimeIsUp: a planner whose time ran out
// while it waited for room is deferred (cursor saved), not failed; a
// Redis error with time left is an error.
func TestBackPressureHandsThePlannerBackWhenItsTimeIsUp(t *testing.T) {
	p := backPressure{depth: failingDepth{}, limit: DefaultMaxPendingBatches}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var d *Deferred
	if err := p.wait(ctx); !errors.As(err, &d) || IsFailure(err) {
		t.Fatalf("time up: %v, want a deferral", err)
	}
	if err := p.wait(context.Background()); err == nil || errors.As(err, &d) {
		t.Fatalf("a Redis error with time left: %v, want the error", err)
	}
}
