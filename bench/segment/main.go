// Command segment is `make bench-segment` (issue #32): N subscribers
// (default 1000000, N=…) loaded through the store's bulk path
// (store.Redis.SubscribeMany, with their tags in the same step), then a
// segment of three terms, topic:updates AND tag:beta AND NOT tag:paid,
// counted ROUNDS times (default 10) as GET /api/segments/count counts it
// (store.Redis.SegmentCount: every shard's bitmaps read in one round
// trip and combined in Go), the same with a join date beside, and the
// segment's readers walked as the issue planner walks them
// (SegmentAudienceByShard, pages of 10,000).
//
// NEWSLETTER_BENCH_REDIS_URL picks the Redis (default 127.0.0.1:6379 db
// 15, which is emptied).
package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-segment:", err)
		os.Exit(1)
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func run() error {
	ctx := context.Background()
	n, rounds := envInt("N", 1000000), envInt("ROUNDS", 10)
	rdb, err := bench.Redis(ctx, bench.RedisURL())
	if err != nil {
		return err
	}
	defer func() { bench.Warn("close redis", rdb.Close()) }()
	st := store.NewRedis(rdb)
	start := time.Now()
	if err := load(ctx, st, n); err != nil {
		return err
	}
	took := time.Since(start)
	fmt.Printf("loaded %d subscribers in %s (%.0f a second)\n", n, took.Round(time.Millisecond), float64(n)/took.Seconds())

	yesterday := time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)
	for _, expr := range []string{
		"topic:updates AND tag:beta AND NOT tag:paid",
		"topic:updates AND tag:beta AND NOT tag:paid AND joined > " + yesterday,
	} {
		var times []time.Duration
		var c store.SegmentCount
		for range rounds {
			t0 := time.Now()
			if c, err = st.SegmentCount(ctx, expr); err != nil {
				return err
			}
			times = append(times, time.Since(t0))
		}
		slices.Sort(times)
		fmt.Printf("count %q: %d active of %d matching; %d rounds: min %s, median %s, max %s\n", expr, c.Active, c.Matching,
			rounds, ms(times[0]), ms(times[len(times)/2]), ms(times[len(times)-1]))
	}
	expr := "topic:updates AND tag:beta AND NOT tag:paid"
	t0 := time.Now()
	readers, pages := 0, 0
	for after := int64(0); ; pages++ {
		ids, err := st.SegmentAudienceByShard(ctx, expr, after, 10000)
		if err != nil {
			return err
		}
		readers += len(ids)
		if len(ids) < 10000 {
			break
		}
		after = store.WalkKey(ids[len(ids)-1])
	}
	walk := time.Since(t0)
	fmt.Printf("walk %q: %d readers in %d pages of 10000, %s (%.0f ns a reader)\n", expr, readers, pages+1, ms(walk),
		float64(walk.Nanoseconds())/float64(max(readers, 1)))
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// load writes n subscribers through SubscribeMany from 8 goroutines:
// every other one has updates (the rest the digest alone), half are
// tagged beta and a third paid.
func load(ctx context.Context, st *store.Redis, n int) error {
	const workers, batch = 8, 1000
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs := make([]store.SubscribeRequest, 0, batch)
			for {
				lo := int(next.Add(batch)) - batch
				if lo >= n {
					return
				}
				reqs = reqs[:0]
				for i := lo; i < min(lo+batch, n); i++ {
					tp := []string{topics.Digest}
					if i%2 == 0 {
						tp = []string{topics.Digest, topics.Updates}
					}
					var tags []string
					if i%4 < 2 {
						tags = append(tags, "beta")
					}
					if i%3 == 0 {
						tags = append(tags, "paid")
					}
					reqs = append(reqs, store.SubscribeRequest{Email: fmt.Sprintf("reader%08d@example.org", i),
						Activate: true, OnlyNew: true, Topics: tp, Tags: tags, Source: store.SourceImport})
				}
				res, err := st.SubscribeMany(ctx, reqs)
				if err != nil {
					errs[w] = err
					return
				}
				for i, e := range res {
					if e != nil {
						errs[w] = fmt.Errorf("%s: %w", reqs[i].Email, e)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
