// Command sms is `make bench-sms` (issue #31): N texts (default 20000,
// N=…) as sms:deliver tasks through the real sms lane (a worker with one
// lane of 16 workers: the reader read, the number's state, the delivery
// mark, the day's caps, sms.Client) into a local Twilio-shaped gateway
// (internal/testkit/twiliotest), beside a bare loop of sms.Client.Send
// from 16 goroutines into the same gateway, in the same run.
//
// The worker and the bare loop each run in a child process (this binary
// again), so their CPU is measured apart from the gateway's, which runs
// here. Redis's CPU is read around the enqueue and around the lane's run.
//
// NEWSLETTER_BENCH_REDIS_URL picks the Redis (default 127.0.0.1:6379 db
// 15, which is emptied).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/channels/sms/smstest"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

// childEnv carries a child's job.
const childEnv = "NEWSLETTER_BENCH_SMS_CHILD"

// senders is the sms lane's concurrency here, and the bare loop's
// goroutines.
const senders = 16

// text is a typical event text: one segment.
const text = "Newsletter: we launched. Read more at https://news.example.com/l/42 Reply STOP to stop."

type job struct {
	Mode       string // "lane" or "bare"
	RedisURL   string
	Gateway    string
	AccountSID string
	AuthToken  string
	N          int
}

// bareResult is what the bare loop's child reports.
type bareResult struct {
	Sent, Errors int64
}

func main() {
	var j job
	isChild, err := bench.ChildJob(childEnv, &j)
	if err == nil && isChild {
		err = child(j)
	}
	if err == nil && !isChild {
		err = run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-sms:", err)
		os.Exit(1)
	}
}

// number is the i-th reader's number.
func number(i int) string { return fmt.Sprintf("+447400%06d", i) }

func run() error {
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("N")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	url := bench.RedisURL()
	rdb, err := bench.Redis(ctx, url)
	if err != nil {
		return err
	}
	defer func() { bench.Warn("close redis", rdb.Close()) }()
	st := store.NewRedis(rdb)

	began := time.Now()
	ids, err := seedReaders(ctx, st, n)
	if err != nil {
		return err
	}
	fmt.Printf("sms: %d texts of %d characters, %d senders, a local Twilio-shaped gateway (HTTP/1.1, loopback), %d CPUs; %d readers seeded in %s\n",
		n, len(text), senders, runtime.NumCPU(), len(ids), time.Since(began).Round(time.Millisecond))

	tb := bench.NewTB()
	gw := smstest.New(tb)
	defer func() {
		for _, e := range tb.Close() {
			bench.Warn("gateway", fmt.Errorf("%s", e))
		}
	}()
	base := job{RedisURL: url, Gateway: gw.URL, AccountSID: gw.AccountSID, AuthToken: gw.AuthToken, N: n}

	// The bare loop first: its texts are counted before the lane's.
	bare, err := runBare(base)
	if err != nil {
		return err
	}
	lane, err := runLane(ctx, rdb, base, ids, len(gw.Messages()), gw)
	if err != nil {
		return err
	}
	fmt.Printf("%-44s %9s %9s %14s %16s\n", "", "texts/s", "wall", "CPU/text", "Redis CPU/text")
	fmt.Printf("%-44s %9.0f %9s %12.1fµs %16s\n", "bare loop (sms.Client.Send, 16 goroutines)",
		float64(bare.sent)/bare.wall.Seconds(), bare.wall.Round(time.Millisecond), us(bare.cpu, bare.sent), "-")
	fmt.Printf("%-44s %9.0f %9s %12.1fµs %14.1fµs   %3.0f%% of bare's rate\n", "sms lane (sms:deliver, worker, 16 workers)",
		float64(n)/lane.wall.Seconds(), lane.wall.Round(time.Millisecond), us(lane.cpu, int64(n)), us(lane.redis, int64(n)),
		100*(float64(n)/lane.wall.Seconds())/(float64(bare.sent)/bare.wall.Seconds()))
	fmt.Printf("enqueue of the %d tasks (not in the lane's figures): %s, Redis CPU %.1fµs a text\n",
		n, lane.enqueueWall.Round(time.Millisecond), us(lane.enqueueRedis, int64(n)))
	fmt.Printf("Redis in the lane, per text: %s\n", lane.stats.PerMail(int64(n), 5))
	fmt.Printf("gateway: %d messages taken (%d bare, %d through the lane), %d requests\n",
		len(gw.Messages()), bare.sent, n, gw.Attempts())
	return nil
}

func us(d time.Duration, n int64) float64 { return float64(d.Nanoseconds()) / 1000 / float64(n) }

// seedReaders subscribes n active readers to updates, each with a number
// and SMS among their channels for updates, and returns their ids.
func seedReaders(ctx context.Context, st *store.Redis, n int) ([]int64, error) {
	reqs := make([]store.SubscribeRequest, n)
	for i := range reqs {
		reqs[i] = store.SubscribeRequest{Email: fmt.Sprintf("s%06d@example.org", i), Activate: true, OnlyNew: true, Topics: []string{topics.Updates}}
	}
	errs, err := st.SubscribeMany(ctx, reqs)
	if err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	ids, err := st.AudienceAfter(ctx, topics.Updates, 0, n)
	if err != nil {
		return nil, err
	}
	if len(ids) != n {
		return nil, fmt.Errorf("%d readers of updates, want %d", len(ids), n)
	}
	err = parallel(len(ids), func(i int) error {
		if _, err := st.SetPhone(ctx, ids[i], number(i), "bench"); err != nil {
			return err
		}
		return st.SetChannels(ctx, ids[i], topics.Updates, store.AllChannels)
	})
	return ids, err
}

// parallel runs f(0..n-1) from 16 goroutines and returns the first error.
func parallel(n int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

type bareRun struct {
	sent      int64
	wall, cpu time.Duration
}

func runBare(base job) (bareRun, error) {
	j := base
	j.Mode = "bare"
	c, err := bench.StartChild(childEnv, j)
	if err != nil {
		return bareRun{}, err
	}
	defer c.Close()
	if err := c.Go(); err != nil {
		return bareRun{}, err
	}
	var res bareResult
	if err := c.Done(&res); err != nil {
		return bareRun{}, err
	}
	wall, cpu, err := c.Since()
	if err != nil {
		return bareRun{}, err
	}
	if res.Errors > 0 || res.Sent != int64(base.N) {
		return bareRun{}, fmt.Errorf("bare loop: %d sent, %d errors", res.Sent, res.Errors)
	}
	return bareRun{sent: res.Sent, wall: wall, cpu: cpu}, nil
}

type laneRun struct {
	wall, cpu, redis          time.Duration
	enqueueWall, enqueueRedis time.Duration
	stats                     bench.RedisStats
}

// runLane enqueues one sms:deliver task per reader, then starts the
// worker and times it until the gateway has taken every text (before
// were there already).
func runLane(ctx context.Context, rdb *redis.Client, base job, ids []int64, before int, gw *smstest.Server) (laneRun, error) {
	var r laneRun
	redis0, err := bench.RedisCPU(ctx, rdb)
	if err != nil {
		return r, err
	}
	began := time.Now()
	client := asynq.NewClientFromRedisClient(rdb) // shares rdb: nothing of its own to close
	err = parallel(len(ids), func(i int) error {
		_, err := client.EnqueueContext(ctx, tasks.NewSMS(tasks.SMSPayload{Key: "ev:bench", SubscriberID: ids[i], Topics: []string{topics.Updates}, Text: text}))
		return err
	})
	if err != nil {
		return r, err
	}
	r.enqueueWall = time.Since(began)
	redis1, err := bench.RedisCPU(ctx, rdb)
	if err != nil {
		return r, err
	}
	r.enqueueRedis = redis1 - redis0

	j := base
	j.Mode = "lane"
	c, err := bench.StartChild(childEnv, j)
	if err != nil {
		return r, err
	}
	defer c.Close()
	stats0, err := bench.ReadRedisStats(ctx, rdb)
	if err != nil {
		return r, err
	}
	if redis1, err = bench.RedisCPU(ctx, rdb); err != nil {
		return r, err
	}
	if err := c.Go(); err != nil {
		return r, err
	}
	want := before + len(ids)
	deadline := time.Now().Add(10 * time.Minute)
	for len(gw.Messages()) < want {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("the lane delivered %d of %d texts in 10 minutes", len(gw.Messages())-before, len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r.wall, r.cpu, err = c.Since(); err != nil {
		return r, err
	}
	redis2, err := bench.RedisCPU(ctx, rdb)
	if err != nil {
		return r, err
	}
	r.redis = redis2 - redis1
	stats1, err := bench.ReadRedisStats(ctx, rdb)
	if err != nil {
		return r, err
	}
	r.stats = stats1.Since(stats0)
	return r, nil
}

// child runs the lane's worker or the bare loop.
func child(j job) error {
	gw := &sms.Client{BaseURL: j.Gateway, AccountSID: j.AccountSID, AuthToken: j.AuthToken, From: "+15005550006"}
	switch j.Mode {
	case "bare":
		return bench.ChildRun(func() (any, error) { return bareLoop(gw, j.N), nil })
	case "lane":
		opt, err := redis.ParseURL(j.RedisURL)
		if err != nil {
			return err
		}
		rdb := redis.NewClient(opt)
		defer func() { bench.Warn("close redis", rdb.Close()) }()
		log := slog.New(slog.DiscardHandler)
		// The caps above N: the bench measures the lane, not its limits.
		h := worker.NewHandlers(worker.Deps{Store: store.NewRedis(rdb), SMS: gw,
			SMSLimits: worker.SMSLimits{PerNumberDay: j.N + 1, PerDay: j.N + 1}, Log: log})
		w := worker.New(rdb, worker.Config{Log: log, Lanes: []worker.Lane{{Name: tasks.LaneSMS, Concurrency: senders}}}, h)
		defer w.Shutdown()
		return bench.ChildRun(func() (any, error) { return nil, w.Start() })
	}
	return fmt.Errorf("unknown mode %q", j.Mode)
}

// bareLoop sends n texts, one to each reader's number, from 16
// goroutines: what the gateway's client alone costs.
func bareLoop(gw *sms.Client, n int) bareResult {
	var sent, errs atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	for range senders {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if _, err := gw.Send(ctx, number(i), text); err != nil {
					errs.Add(1)
					continue
				}
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	return bareResult{Sent: sent.Load(), Errors: errs.Load()}
}
