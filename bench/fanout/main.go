// Command fanout measures what the fan-out costs Redis: one event to a
// topic of N subscribers (default 20000, N=…), each with e-mail and one
// browser (so two channels), fanned out by the worker's own handler
// (event:fanout) in this process. It prints Redis's CPU per recipient and
// channel (the target is at most 20 µs), from the server's CPU time, and
// the commands that took it, from INFO commandstats. The fan-out is run a
// second time (a retry after a crash) to show what a re-run costs.
//
// make bench-fanout; NEWSLETTER_BENCH_REDIS_URL picks the Redis (default
// 127.0.0.1:6379 db 15, which is emptied).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-fanout:", err)
		os.Exit(1)
	}
}

func run() error {
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("N")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	rdb, err := bench.Redis(ctx, bench.RedisURL())
	if err != nil {
		return err
	}
	defer func() { bench.Warn("close redis", rdb.Close()) }()
	st := store.NewRedis(rdb)

	ids, err := seedReaders(ctx, st, n)
	if err != nil {
		return err
	}
	h, err := newFanoutSender(rdb, st)
	if err != nil {
		return err
	}
	p := tasks.FanoutPayload{ID: tasks.NewEventID(), Topic: topics.Updates, Title: "We launched", URL: "https://example.com/launch", At: time.Now()}
	fmt.Printf("fan-out of one event to %d readers with e-mail and a browser each (%d channel tasks' worth)\n", len(ids), 2*len(ids))
	// The same event twice: the second run is what a retry after a crash
	// costs once every reader is already marked.
	for _, round := range []string{"first run", "run again (every reader marked)"} {
		if err := measureRound(ctx, rdb, h, p, round, len(ids)); err != nil {
			return err
		}
	}
	return reportQueues(rdb)
}

// seedReaders subscribes n readers to the updates topic, each with e-mail
// and one browser, so the fan-out has two channels per reader, and
// returns their ids.
func seedReaders(ctx context.Context, st *store.Redis, n int) ([]int64, error) {
	reqs := make([]store.SubscribeRequest, n)
	for i := range reqs {
		reqs[i] = store.SubscribeRequest{Email: fmt.Sprintf("f%06d@example.org", i), Activate: true, OnlyNew: true}
	}
	if _, err := st.SubscribeMany(ctx, reqs); err != nil {
		return nil, err
	}
	p256dh, auth := make([]byte, 65), make([]byte, 16)
	p256dh[0] = 4
	ids, err := st.AudienceAfter(ctx, topics.Updates, 0, n)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		b := store.PushSubscription{Endpoint: fmt.Sprintf("https://push.example.net/b/%d", id), P256DH: p256dh, Auth: auth}
		if err := st.AddPushSubscription(ctx, id, b); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// newFanoutSender builds the worker's own event:fanout handler in this
// process, so what is measured is the real handler's Redis traffic.
func newFanoutSender(rdb *redis.Client, st *store.Redis) (*worker.FanoutSender, error) {
	client := asynq.NewClientFromRedisClient(rdb) // shares rdb: nothing of its own to close
	render, err := mailer.NewRenderer("")
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.DiscardHandler)
	return worker.NewHandlers(worker.Deps{Store: st, Render: render, Queue: client, Log: log}).Fanout, nil
}

// measureRound runs the fan-out once and prints what it cost Redis, per
// recipient and channel (readers readers, two channels each), between
// readings of the server's CPU time and INFO commandstats taken around it.
func measureRound(ctx context.Context, rdb *redis.Client, h *worker.FanoutSender, p tasks.FanoutPayload, round string, readers int) error {
	stats0, err := bench.ReadRedisStats(ctx, rdb)
	if err != nil {
		return err
	}
	cpu0, err := bench.RedisCPU(ctx, rdb)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := h.HandleFanout(ctx, p); err != nil {
		return err
	}
	elapsed := time.Since(start)
	cpu1, err := bench.RedisCPU(ctx, rdb)
	if err != nil {
		return err
	}
	stats1, err := bench.ReadRedisStats(ctx, rdb)
	if err != nil {
		return err
	}
	per := (cpu1 - cpu0) / time.Duration(2*readers)
	fmt.Printf("%s: %s (%.0f readers/s); Redis CPU %s in all, %.1f µs per recipient and channel (target ≤ 20 µs)\n",
		round, elapsed.Round(time.Millisecond), float64(readers)/elapsed.Seconds(), (cpu1 - cpu0).Round(time.Millisecond),
		float64(per.Nanoseconds())/1000)
	fmt.Printf("  per recipient and channel: %s\n", stats1.Since(stats0).PerMail(int64(2*readers), 5))
	return nil
}

// reportQueues prints how many channel tasks the fan-out left waiting in
// the queues it feeds.
func reportQueues(rdb *redis.Client) error {
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for _, q := range []string{tasks.QueuePush, tasks.QueueDefault} {
		info, err := insp.GetQueueInfo(q)
		if err != nil {
			return err
		}
		fmt.Printf("queue %s: %d tasks waiting\n", q, info.Pending)
	}
	return nil
}
