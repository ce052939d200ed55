// Command mobile is `make bench-mobile` (issue #31): one notification to
// each of N readers' app installs (default 20000, N=…; one device each,
// half FCM, half APNs, no browsers) as push:deliver tasks through the
// real push lane (a worker with the push lane's default 32 workers, each
// platform behind its gate of a quarter of them, 8 slots, as the service
// builds it) into the local fakes (internal/testkit/fcmtest, HTTP/1.1;
// apnstest, HTTP/2 over TLS), beside bare loops of fcm.Client.Send and
// apns.Client.Send (8 goroutines each, at once: the gates' slots) into
// the same fakes, in the same run.
//
// The worker and the bare loops run in child processes (this binary
// again), so their CPU is measured apart from the fakes', which run here.
// Redis's CPU is read around the enqueue and around the lane's run.
//
// NEWSLETTER_BENCH_REDIS_URL picks the Redis (default 127.0.0.1:6379 db
// 15, which is emptied).
package main

import (
	"context"
	"crypto/x509"
	"errors"
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
	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/apns/apnstest"
	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/fcm/fcmtest"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

// childEnv carries a child's job.
const childEnv = "NEWSLETTER_BENCH_MOBILE_CHILD"

// laneWorkers is NEWSLETTER_PUSH_CONCURRENCY's default; each platform
// may hold a quarter of them (cmd/newsletter appGates), and the bare
// loops run that many goroutines per platform.
const (
	laneWorkers = 32
	slots       = laneWorkers / 4
)

// The notification: an event's title and link.
const (
	title = "We launched"
	link  = "https://news.example.com/l/42"
)

type job struct {
	Mode     string // "lane" or "bare"
	RedisURL string
	N        int
	FCMURL   string
	FCMCreds string // the service account's key file
	APNsURL  string
	APNsKey  string // the .p8 file
	APNsCert []byte // the fake's certificate, PEM
}

// bareResult is what the bare loops' child reports.
type bareResult struct {
	FCM, APNs, Errors int64
	FCMWall, APNsWall time.Duration
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
		fmt.Fprintln(os.Stderr, "bench-mobile:", err)
		os.Exit(1)
	}
}

// The i-th device's platform and token: even i FCM, odd i APNs; each token
// of its platform's shape (fcm.ValidToken, apns.ValidToken).
func device(i int) store.Device {
	if i%2 == 0 {
		return store.Device{Platform: store.PlatformFCM, Token: fmt.Sprintf("bench-%06d:APA91b-registration-token-of-an-install", i)}
	}
	return store.Device{Platform: store.PlatformAPNs, Token: fmt.Sprintf("%064x", i)}
}

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
	fmt.Printf("mobile push: %d notifications (half FCM over HTTP/1.1, half APNs over HTTP/2 and TLS, local fakes), push lane of %d workers, %d slots a platform, %d CPUs; %d readers seeded in %s\n",
		n, laneWorkers, slots, runtime.NumCPU(), len(ids), time.Since(began).Round(time.Millisecond))

	tb := bench.NewTB()
	fcmFake, apnsFake := fcmtest.New(tb), apnstest.New(tb)
	defer func() {
		for _, e := range tb.Close() {
			bench.Warn("fake", errors.New(e))
		}
	}()
	base := job{RedisURL: url, N: n, FCMURL: fcmFake.URL, FCMCreds: fcmFake.CredentialsFile,
		APNsURL: apnsFake.URL, APNsKey: apnsFake.KeyFile, APNsCert: apnsFake.CertPEM()}
	taken := func() int { return len(fcmFake.Received()) + len(apnsFake.Received()) }

	bare, err := runBare(base)
	if err != nil {
		return err
	}
	lane, err := runLane(ctx, rdb, base, ids, taken)
	if err != nil {
		return err
	}
	bareRate := float64(bare.sent) / bare.wall.Seconds()
	laneRate := float64(n) / lane.wall.Seconds()
	fmt.Printf("%-52s %9s %9s %14s %16s\n", "", "pushes/s", "wall", "CPU/push", "Redis CPU/push")
	fmt.Printf("%-52s %9.0f %9s %12.1fµs %16s\n", "bare loops (fcm + apns Client.Send, 8 goroutines each)",
		bareRate, bare.wall.Round(time.Millisecond), us(bare.cpu, bare.sent), "-")
	fmt.Printf("%-52s %9.0f %9s %12.1fµs %14.1fµs   %3.0f%% of bare's rate\n", "push lane (push:deliver, worker, 32 workers)",
		laneRate, lane.wall.Round(time.Millisecond), us(lane.cpu, int64(n)), us(lane.redis, int64(n)), 100*laneRate/bareRate)
	fmt.Printf("bare loops by platform: FCM %d in %s (%.0f/s), APNs %d in %s (%.0f/s)\n",
		bare.res.FCM, bare.res.FCMWall.Round(time.Millisecond), float64(bare.res.FCM)/bare.res.FCMWall.Seconds(),
		bare.res.APNs, bare.res.APNsWall.Round(time.Millisecond), float64(bare.res.APNs)/bare.res.APNsWall.Seconds())
	fmt.Printf("enqueue of the %d tasks (not in the lane's figures): %s, Redis CPU %.1fµs a push\n",
		n, lane.enqueueWall.Round(time.Millisecond), us(lane.enqueueRedis, int64(n)))
	fmt.Printf("Redis in the lane, per push: %s\n", lane.stats.PerMail(int64(n), 5))
	fmt.Printf("fakes: FCM took %d of %d requests (%d token exchanges), APNs %d of %d requests on %d connections\n",
		len(fcmFake.Received()), fcmFake.Sends(), fcmFake.Exchanges(), len(apnsFake.Received()), apnsFake.Requests(), apnsFake.Connections())
	return nil
}

func us(d time.Duration, n int64) float64 { return float64(d.Nanoseconds()) / 1000 / float64(n) }

// seedReaders subscribes n active readers to updates, each with one app
// install (device(i)) and no browser, and returns their ids.
func seedReaders(ctx context.Context, st *store.Redis, n int) ([]int64, error) {
	reqs := make([]store.SubscribeRequest, n)
	for i := range reqs {
		reqs[i] = store.SubscribeRequest{Email: fmt.Sprintf("m%06d@example.org", i), Activate: true, OnlyNew: true, Topics: []string{topics.Updates}}
	}
	errs, err := st.SubscribeMany(ctx, reqs)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ids, err := st.AudienceAfter(ctx, topics.Updates, 0, n)
	if err != nil {
		return nil, err
	}
	if len(ids) != n {
		return nil, fmt.Errorf("%d readers of updates, want %d", len(ids), n)
	}
	err = parallel(len(ids), 16, func(i int) error {
		_, err := st.AddDevice(ctx, ids[i], device(i))
		return err
	})
	return ids, err
}

// parallel runs f(0..n-1) from workers goroutines and returns the first
// error.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
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
	res       bareResult
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
	var r bareRun
	if err := c.Done(&r.res); err != nil {
		return r, err
	}
	if r.wall, r.cpu, err = c.Since(); err != nil {
		return r, err
	}
	r.sent = r.res.FCM + r.res.APNs
	if r.res.Errors > 0 || r.sent != int64(base.N) {
		return r, fmt.Errorf("bare loops: %d sent, %d errors", r.sent, r.res.Errors)
	}
	return r, nil
}

type laneRun struct {
	wall, cpu, redis          time.Duration
	enqueueWall, enqueueRedis time.Duration
	stats                     bench.RedisStats
}

// runLane enqueues one push:deliver task per reader, then starts the
// worker and times it until the fakes have taken every notification.
func runLane(ctx context.Context, rdb *redis.Client, base job, ids []int64, taken func() int) (laneRun, error) {
	var r laneRun
	before := taken()
	redis0, err := bench.RedisCPU(ctx, rdb)
	if err != nil {
		return r, err
	}
	began := time.Now()
	client := asynq.NewClientFromRedisClient(rdb) // shares rdb: nothing of its own to close
	err = parallel(len(ids), 16, func(i int) error {
		_, err := client.EnqueueContext(ctx, tasks.NewPush(tasks.PushPayload{Key: "ev:bench", SubscriberID: ids[i], Topics: []string{topics.Updates}, Title: title, URL: link}))
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
	for taken() < want {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("the lane delivered %d of %d notifications in 10 minutes", taken()-before, len(ids))
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

// clients are the two platforms' clients as the service builds them
// (cmd/newsletter appGates), on the fakes.
func clients(j job) (*fcm.Client, *apns.Client, error) {
	creds, err := fcm.LoadCredentials(j.FCMCreds)
	if err != nil {
		return nil, nil, err
	}
	key, err := apns.LoadKey(j.APNsKey)
	if err != nil {
		return nil, nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(j.APNsCert) {
		return nil, nil, errors.New("the APNs fake's certificate does not parse")
	}
	f := &fcm.Client{Creds: creds, BaseURL: j.FCMURL}
	a := &apns.Client{Key: key, KeyID: apnstest.KeyID, TeamID: apnstest.TeamID, Topic: apnstest.Topic, BaseURL: j.APNsURL,
		HTTP: apns.NewHTTPClient(roots)}
	return f, a, nil
}

// child runs the lane's worker or the bare loops.
func child(j job) error {
	fc, ac, err := clients(j)
	if err != nil {
		return err
	}
	switch j.Mode {
	case "bare":
		return bench.ChildRun(func() (any, error) { return bareLoops(fc, ac, j.N), nil })
	case "lane":
		opt, err := redis.ParseURL(j.RedisURL)
		if err != nil {
			return err
		}
		rdb := redis.NewClient(opt)
		defer func() { bench.Warn("close redis", rdb.Close()) }()
		log := slog.New(slog.DiscardHandler)
		h := worker.NewHandlers(worker.Deps{Store: store.NewRedis(rdb), Log: log, Apps: map[string]*worker.AppGate{
			store.PlatformFCM:  worker.NewAppGate(fc, slots, 0),
			store.PlatformAPNs: worker.NewAppGate(ac, slots, 0),
		}})
		w := worker.New(rdb, worker.Config{Log: log, Lanes: []worker.Lane{{Name: tasks.LanePush, Concurrency: laneWorkers}}}, h)
		defer w.Shutdown()
		return bench.ChildRun(func() (any, error) { return nil, w.Start() })
	}
	return fmt.Errorf("unknown mode %q", j.Mode)
}

// bareLoops sends the n notifications, FCM's and APNs' at once, each from
// slots goroutines: what the platforms' clients alone cost.
func bareLoops(fc *fcm.Client, ac *apns.Client, n int) bareResult {
	var res bareResult
	var errs atomic.Int64
	loop := func(send func(ctx context.Context, token string) error, first int, sent *int64, wall *time.Duration) {
		var next, count atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for range slots {
			wg.Go(func() {
				ctx := context.Background()
				// This platform's devices: first, first+2, first+4, ...
				for i := first + 2*(int(next.Add(1))-1); i < n; i = first + 2*(int(next.Add(1))-1) {
					if err := send(ctx, device(i).Token); err != nil {
						errs.Add(1)
						continue
					}
					count.Add(1)
				}
			})
		}
		wg.Wait()
		*sent, *wall = count.Load(), time.Since(start)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		loop(func(ctx context.Context, token string) error {
			return fc.Send(ctx, token, fcm.Notification{Title: title, URL: link})
		}, 0, &res.FCM, &res.FCMWall)
	})
	wg.Go(func() {
		loop(func(ctx context.Context, token string) error {
			return ac.Send(ctx, token, apns.Notification{Title: title, URL: link})
		}, 1, &res.APNs, &res.APNsWall)
	})
	wg.Wait()
	res.Errors = errs.Load()
	return res
}
