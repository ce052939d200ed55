package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/bench"
)

// world is everything a run started.
type world struct {
	s      settings
	dir    string
	tb     *bench.TB
	redis  redisBackend
	rdb    redis.UniversalClient
	mail   *mailPath
	sms    *smsPath
	roles  []*role
	load   *loader
	chaos  *chaos
	mails  []mail
	seen   int
	points []point
	checks []string
}

func soak(s settings) (bool, error) {
	w, err := setUp(s)
	if w != nil {
		defer w.tearDown()
	}
	if err != nil {
		return false, err
	}
	fmt.Printf("soak: %s of load and faults; logs and report in %s\n", s.duration, w.dir)
	start := time.Now()
	w.loadAndFaults()
	drainTook := w.drain()
	sum := w.finalCheck()
	sum.duration, sum.drainTook = s.duration, drainTook
	sum.settings = fmt.Sprintf("SOAK_RATE %g ops/s, at most %d addresses, NEWSLETTER_CONCURRENCY %d, welcome delay %s, %s",
		s.rate, w.load.signups, s.concurrency, s.welcomeDelay, w.redis.describe())
	if err := writeReport(w.dir, sum); err != nil {
		return false, err
	}
	if err := writePlot(w.dir, w.points, w.chaos); err != nil {
		warn("plot", err)
	}
	fmt.Printf("soak: %s after %s; report %s\n", map[bool]string{true: "PASS", false: "FAIL"}[sum.ok], time.Since(start).Round(time.Second), filepath.Join(w.dir, "report.md"))
	return sum.ok, nil
}

func setUp(s settings) (*world, error) {
	dir, err := runDir()
	if err != nil {
		return nil, err
	}
	w := &world{s: s, dir: dir, tb: bench.NewTB()}
	rlog, err := os.Create(filepath.Join(dir, "logs", "soak-redis-client.log"))
	if err != nil {
		return w, err
	}
	w.tb.Cleanup(func() { warn("close redis log", rlog.Close()) })
	redis.SetLogger(fileLogger{rlog})
	bin, cleanBin, err := bench.BuildBinary()
	if err != nil {
		return w, err
	}
	w.tb.Cleanup(cleanBin)
	redisDir, err := filepath.Abs(filepath.Join(dir, "logs"))
	if err != nil {
		return w, err
	}
	if s.cluster {
		w.redis, err = startCluster(redisDir, s.redisPort, s.sentinelPort)
	} else {
		w.redis, err = startRedis(redisDir, s.redisPort, s.sentinelPort)
	}
	if err != nil {
		return w, err
	}
	w.rdb = w.redis.client()
	if w.mail, err = startMailPath(w.tb); err != nil {
		return w, err
	}
	if w.sms, err = startSMSPath(w.tb); err != nil {
		return w, err
	}
	env := func(base string) []string {
		return append(environment(w.redis.env(), w.mail.URL(), base, s), w.sms.environment(s.concurrency)...)
	}
	if w.roles, err = startRoles(bin, filepath.Join(dir, "logs"), env); err != nil {
		return w, err
	}
	run := strings.ReplaceAll(filepath.Base(dir), "-", "")
	w.load = &loader{apis: w.roles[:2], base: "http://" + w.roles[0].addr, admin: adminToken, run: run,
		led: newLedger(), client: newClient(), rate: s.rate, signups: int(s.rate * s.duration.Seconds() / 2)}
	w.chaos = &chaos{roles: w.roles, redis: w.redis, mail: w.mail, sms: w.sms, busy: map[string]bool{}}
	return w, nil
}

// loadAndFaults runs the load and the faults for the soak's duration,
// sampling every few seconds and checking the running invariants every
// minute.
func (w *world) loadAndFaults() {
	ctx, cancel := context.WithTimeout(context.Background(), w.s.duration)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.load.loop(ctx, max(w.s.duration/8, 20*time.Second)) }()
	gap := min(max(w.s.duration/30, 8*time.Second), time.Minute)
	go func() { defer wg.Done(); w.chaos.run(ctx, gap) }()
	w.observe(ctx, true)
	wg.Wait()
}

// observe reads new mails every second and samples every sampleEvery
// until ctx ends; with minutely, it checks the running invariants (no
// duplicate beyond the bound, none after an unsubscribe, none early)
// every minute.
func (w *world) observe(ctx context.Context, minutely bool) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastSample, lastCheck := time.Time{}, time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.mails = append(w.mails, watch(w.mail.sink, &w.seen, w.load.led, w.load.run)...)
		if time.Since(lastSample) >= sampleEvery {
			lastSample = time.Now()
			w.points = append(w.points, samplePoint(ctx, w.rdb, w.redis, w.roles, w.load.led, w.seen))
		}
		if minutely && time.Since(lastCheck) >= time.Minute {
			lastCheck = time.Now()
			var v verdict
			checkMails(w.load.led, w.delivered(), w.s.welcomeDelay, false, &v)
			line := fmt.Sprintf("%s: %d mails, %d duplicates, %d after an unsubscribe, %d early", lastCheck.Format(time.TimeOnly), len(w.mails), v.dups, v.afterUnsub, v.early)
			w.checks = append(w.checks, line)
			fmt.Println("soak:", line)
		}
	}
}

// delivered is every mail and text so far.
func (w *world) delivered() []mail {
	return append(w.sms.texts(w.load.led.phones()), w.mails...)
}

// drain waits, load and faults over, until no task waits and no mail has
// come for 15 s (up to 5 minutes), reading the mails meanwhile.
func (w *world) drain() time.Duration {
	start := time.Now()
	deadline := start.Add(5*time.Minute + w.s.welcomeDelay)
	quietSince, lastSeen := time.Now(), w.seen
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		w.observe(ctx, false)
		cancel()
		waiting, _, _, err := backlog(w.rdb)
		if w.seen != lastSeen || err != nil || waiting > 0 {
			quietSince, lastSeen = time.Now(), w.seen
			continue
		}
		if time.Since(quietSince) > 15*time.Second {
			break
		}
	}
	return time.Since(start)
}

func (w *world) finalCheck() summary {
	var sum summary
	texts := w.sms.texts(w.load.led.phones())
	checkMails(w.load.led, append(texts, w.mails...), w.s.welcomeDelay, true, &sum.v)
	sum.texts = len(texts)
	checkState(context.Background(), w.load, &sum.v)
	waiting, archived, reasons, err := backlog(w.rdb)
	if err != nil {
		sum.v.note("queues: " + err.Error())
		waiting = -1
	}
	sum.v.pending, sum.v.archived, sum.v.archivedReasons = waiting, archived, reasons
	sum.faults, sum.mails, sum.minuteChecks = w.chaos.faults, len(w.mails), w.checks
	led := w.load.led
	sum.acks, sum.failed, sum.issues = led.acks, led.failed, len(led.issues)
	sum.p99Faults, sum.nFaults = led.p99(w.chaos.during)
	sum.p99All, sum.nAll = led.p99(nil)
	for _, r := range w.roles {
		sum.crashes += r.crashes
	}
	sum.dupBound = w.s.concurrency * dupFaults(w.chaos.faults)
	w.memory(&sum)
	v := sum.v
	sum.ok = v.lost == 0 && v.wrongState == 0 && v.missing == 0 && v.dups <= sum.dupBound && v.afterUnsub == 0 &&
		v.early == 0 && v.pending == 0 && v.archived == 0 && sum.crashes == 0
	return sum
}

// dupFaults counts the faults that may each send up to a lane's
// concurrency of mails or texts twice: a worker killed -9 (its mails and
// texts sent but not yet marked: two lanes), the Redis primary killed (a
// mark lost with it, in either lane), the mail or SMS path reset or hung
// (a message the fake took whose answer never came back).
func dupFaults(fs []fault) int {
	n := 0
	for _, f := range fs {
		switch {
		case strings.HasPrefix(f.name, "kill -9 worker"), strings.HasPrefix(f.name, "kill -9 Redis"):
			n += 2
		case strings.Contains(f.name, "reset"), strings.Contains(f.name, "hung"):
			n++
		}
	}
	return n
}

// memory fits the slopes of RSS and Redis memory after warm-up (the
// first third of the run).
func (w *world) memory(sum *summary) {
	if len(w.points) == 0 {
		return
	}
	from := w.points[0].at.Add(w.s.duration / 3)
	sum.rssSlope = slope(w.points, from, func(p point) float64 { return p.rss / 1e6 })
	sum.redisSlope = slope(w.points, from, func(p point) float64 { return p.redisMem / 1e6 })
	sum.procSlope, sum.procWho = steepestProcess(w.points, from)
	for _, p := range w.points {
		sum.rssMean += p.rss / 1e6 / float64(len(w.points))
		sum.redisMean += p.redisMem / 1e6 / float64(len(w.points))
	}
}

func (w *world) tearDown() {
	for _, r := range w.roles {
		r.stop(syscall.SIGTERM)
	}
	if w.mail != nil {
		w.mail.close()
	}
	if w.sms != nil {
		w.sms.close()
	}
	if w.rdb != nil {
		warn("close redis client", w.rdb.Close())
	}
	if w.redis != nil {
		w.redis.Stop()
	}
	for _, e := range w.tb.Close() {
		fmt.Fprintln(os.Stderr, "soak:", e)
	}
}

// fileLogger sends go-redis's own lines (a failover's redials) to the
// run's logs instead of the soak's output.
type fileLogger struct{ f *os.File }

func (l fileLogger) Printf(_ context.Context, format string, v ...any) {
	_, err := fmt.Fprintf(l.f, time.Now().UTC().Format(time.RFC3339)+" "+format+"\n", v...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak: redis log:", err)
	}
}
