package autopipe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

var double = redis.NewScript(`return tonumber(ARGV[1]) * 2`)

func TestConcurrentCommandsGetTheirOwnResults(t *testing.T) {
	exec, _ := redistest.New(t, redistest.DBAutopipe)
	hooked := redis.NewClient(exec.Options())
	t.Cleanup(func() { hooked.Close() })
	h := New(exec, 2)
	t.Cleanup(h.Close)
	hooked.AddHook(h)
	ctx := context.Background()
	hooked.Set(ctx, "a-list", "x", 0)
	hooked.LPush(ctx, "not-a-string", "x")

	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for g := 0; g < 100; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			key := fmt.Sprint("k", g)
			if err := hooked.Set(ctx, key, g, 0).Err(); err != nil {
				errs <- err
			}
			if v, err := hooked.Get(ctx, key).Int(); err != nil || v != g {
				errs <- fmt.Errorf("get %s: %d %v", key, v, err)
			}
			if n, err := hooked.Incr(ctx, "counter").Result(); err != nil || n < 1 {
				errs <- fmt.Errorf("incr: %d %v", n, err)
			}
			if v, err := double.Run(ctx, hooked, nil, g).Int(); err != nil || v != 2*g {
				errs <- fmt.Errorf("script: %d %v", v, err)
			}
			// One command's error reply stays its own.
			if err := hooked.Get(ctx, "not-a-string").Err(); err == nil || !errors.As(err, new(redis.Error)) {
				errs <- fmt.Errorf("wrong type: %v", err)
			}
			if err := hooked.Get(ctx, fmt.Sprint("missing", g)).Err(); !errors.Is(err, redis.Nil) {
				errs <- fmt.Errorf("missing key: %v", err)
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n, _ := hooked.Get(ctx, "counter").Int(); n != 100 {
		t.Fatalf("counter %d after 100 INCRs", n)
	}
	if h.batches.Load() == 0 {
		t.Fatal("100 concurrent callers never shared a pipeline")
	}
	// Transactions bypass the batching and still work.
	if _, err := hooked.TxPipelined(ctx, func(p redis.Pipeliner) error { p.Incr(ctx, "tx"); return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestBatchWaitsNoLongerThanItsMostImpatientCaller: the batch runs under
// the earliest deadline of its callers, and none when no caller has one.
func TestBatchWaitsNoLongerThanItsMostImpatientCaller(t *testing.T) {
	now := time.Now()
	soon, cancel1 := context.WithDeadline(context.Background(), now.Add(time.Second))
	defer cancel1()
	later, cancel2 := context.WithDeadline(context.Background(), now.Add(time.Hour))
	defer cancel2()
	ctx, cancel := batchContext([]*call{{ctx: later}, {ctx: context.Background()}, {ctx: soon}})
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || !d.Equal(now.Add(time.Second)) {
		t.Fatalf("batch deadline %v %v, want the earliest caller's", d, ok)
	}
	free, cancel3 := batchContext([]*call{{ctx: context.Background()}})
	defer cancel3()
	if _, ok := free.Deadline(); ok {
		t.Fatal("a batch of callers without deadlines got one")
	}
}
