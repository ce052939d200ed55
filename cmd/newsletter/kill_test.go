package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// TestMain lets a test start this binary as a real `newsletter` process:
// with NEWSLETTER_TEST_MAIN=worker the test binary is the worker; with
// NEWSLETTER_TEST_ARGV=1 it is `newsletter` with its own arguments, as a
// guide's example calls it (TestDocsShellBlocksRun).
func TestMain(m *testing.M) {
	if os.Getenv("NEWSLETTER_TEST_ARGV") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	if role := os.Getenv("NEWSLETTER_TEST_MAIN"); role != "" {
		// The role and its flags ("worker --lanes push").
		os.Exit(run(context.Background(), strings.Fields(role), os.Getenv, os.Stdout, os.Stderr))
	}
	flag.Parse()
	parallelGiven := false
	flag.Visit(func(f *flag.Flag) { parallelGiven = parallelGiven || f.Name == "test.parallel" })
	slots := max(runtime.GOMAXPROCS(0), parallelTests)
	if parallelGiven {
		slots, _ = strconv.Atoi(flag.Lookup("test.parallel").Value.String())
	}
	// go test's own gate lets every parallel test through (a test that
	// waited in it could not get to the bulk sends' way round
	// parallelSlots); parallelSlots holds all but the bulk sends to slots
	// at a time (see bulkTest). Not flag.Set's error: the flag is
	// testing's own, and the value a number.
	_ = flag.Set("test.parallel", strconv.Itoa(everyTest))
	parallelSlots = make(chan struct{}, max(slots, 1))
	redistest.AfterParallel = takeSlot
	os.Exit(m.Run())
}

// parallelTests is how many of the package's parallel tests (those on a
// Redis of their own: redistest.Own, an embedded one or a redis-server
// they start) run at once when go test is not given -parallel, instead of
// its default of one per CPU. Most of their time is spent waiting, on
// asynq's pollers and recoverer, on a worker process starting, on a
// browser: run one after another, the package used half of one core.
// In a run of six at a time TestChannelIsolation fell short of its
// two-minute wait on a busy machine (docs/performance.md, the test
// suite's time).
// -parallel still says otherwise.
const parallelTests = 4

// parallelSlots is the package's own gate for its parallel tests,
// parallelTests (or -parallel) wide. go test's gate hands its slots to
// the waiting tests in no order it promises (in practice the last
// declared first), and the bulk sends, the package's long pole, often
// got theirs minutes after the start, once most of the others had run.
// They now pass go test's gate at once and skip this one (bulkTest):
// they wait only for each other (oneBulkSendAtATime), and run beside
// parallelTests others from the package's first parallel second.
var parallelSlots chan struct{}

// everyTest is go test's -parallel as TestMain sets it: more than the
// package has tests and subtests, so that none waits in go test's gate.
const everyTest = 10000

// takeSlot holds t, which has just called t.Parallel, until one of
// parallelSlots is free, and frees it when t ends. redistest.Own calls
// it (redistest.AfterParallel); a test that calls t.Parallel itself
// calls parallel instead.
func takeSlot(t *testing.T) {
	if parallelSlots == nil { // a test run without TestMain's set-up
		return
	}
	parallelSlots <- struct{}{}
	t.Cleanup(func() { <-parallelSlots })
}

// parallel is t.Parallel and then a slot of parallelSlots.
func parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	takeSlot(t)
}

// bulkTest is t.Parallel for the bulk sends (TestLaneIsolation,
// TestChannelIsolation, TestClusterIssueToManyReaders): no slot of
// parallelSlots, and one bulk send at a time (oneBulkSendAtATime). A
// test's elapsed time in go test's report includes its wait for a
// slot.
func bulkTest(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// bulkSends lets one bulk send at a time run among the parallel tests:
// the tests that push thousands of messages through a worker within a
// deadline (TestClusterIssueToManyReaders, TestChannelIsolation,
// TestLaneIsolation) each keep a core busy, and two of them beside each
// other on a busy 2-core machine fell short of their waits (20,000
// readers not done in two minutes). The other parallel tests, which
// mostly wait, go on beside the one running.
var bulkSends = make(chan struct{}, 1)

// oneBulkSendAtATime waits for the other bulk sends to end, then holds
// the turn until t ends or until it calls the returned done, whichever
// comes first. A test calls it once its readers are seeded (the set-up,
// a Redis, a cluster and thousands of subscribers, runs beside the other
// bulk sends: none of it waits on a deadline) and before its deadlines
// start, and calls done once its bulk send is over: what
// follows in the isolation tests (a lane backing up while its provider
// hangs, asynq's recoverer handing a killed worker's tasks back, a
// minute or two of waiting) keeps no core busy, and the next bulk send
// need not wait for it.
func oneBulkSendAtATime(t *testing.T) (done func()) {
	t.Helper()
	bulkSends <- struct{}{}
	var once sync.Once
	done = func() { once.Do(func() { <-bulkSends }) }
	t.Cleanup(done)
	return done
}

// recoverAfter is the longest asynq takes to hand a killed worker's task
// to another: its recoverer looks every minute for tasks whose lease (30 s
// from the last heartbeat) ran out at least 30 s before.
const recoverAfter = 2 * time.Minute

// expireKilledLeases stands for the time asynq waits before it gives a
// killed worker's tasks to another: it moves the lease of every task
// still active back by an hour (asynq's lease zsets, one per queue, whose
// scores are the leases' ends), as if the minute had passed. It must be
// called once every worker process is dead and before the next one
// starts: asynq's recoverer runs when a server starts (then every
// minute), finds the leases expired, and hands those tasks back as
// retries, as it would have a minute or two later. Everything the test
// checks of the recovery (who gets the mail, how many twice, the claims
// the retries take over) is the same; only the wait is gone. It fails
// the test while an asynq server other than the dead one still reports
// (a live one's leases are not its to expire).
func expireKilledLeases(t *testing.T, rdb redis.UniversalClient, dead *exec.Cmd) {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	servers, err := insp.Servers()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if s.PID != dead.Process.Pid {
			t.Fatalf("expireKilledLeases: asynq server %s (pid %d) is alive beside the killed pid %d", s.ID, s.PID, dead.Process.Pid)
		}
	}
	queues, err := insp.Queues()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	past := float64(time.Now().Add(-time.Hour).Unix())
	expired := 0
	for _, q := range queues {
		key := "asynq:{" + q + "}:lease"
		ids, err := rdb.ZRange(ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if err := rdb.ZAddXX(ctx, key, redis.Z{Score: past, Member: id}).Err(); err != nil {
				t.Fatal(err)
			}
			expired++
		}
	}
	t.Logf("expired the leases of the killed worker's %d active tasks", expired)
}

// expireDeadLeases is expireKilledLeases for a worker killed beside
// others that live on (the service's own lanes): it expires the leases of
// the dead worker's tasks in queue, and only those, so that the next
// asynq server to start (whose recoverer runs at once, then every
// minute) hands them back as retries, as the live servers' recoverers
// would have one or two minutes later. The tasks are told apart by their
// leases: every asynq server extends the leases of its running tasks at
// each heartbeat (every 5 s, to a whole second 30 s ahead) and a dead one
// no longer does. The leases are read once the worker is dead; then it
// waits, with a deadline, until every live asynq server has beaten three
// times (the TTL of its asynq:servers key renewed: a beat writes it, then
// extends its leases, and the next beat starts 5 s after). The second
// of those beats extended every lease the server then held, at least
// 5 s after it was read, so to another second; the third's renewal says
// the second's extension is done. A lease read then as before is a dead
// task's. It returns how many leases it expired.
func expireDeadLeases(t *testing.T, rdb redis.UniversalClient, queue string, dead *exec.Cmd) int {
	t.Helper()
	ctx := context.Background()
	key := "asynq:{" + queue + "}:lease"
	before, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	servers, err := insp.Servers()
	if err != nil {
		t.Fatal(err)
	}
	// beats counts each live server's renewals of its key's TTL.
	type live struct {
		key   string
		ttl   time.Duration
		beats int
	}
	var alive []*live
	for _, s := range servers {
		if s.PID != dead.Process.Pid {
			alive = append(alive, &live{key: fmt.Sprintf("asynq:servers:{%s:%d:%s}", s.Host, s.PID, s.ID), ttl: -1})
		}
	}
	poll.Until(t, poll.BusyMachine, func() error {
		for _, s := range alive {
			ttl, err := rdb.PTTL(ctx, s.key).Result()
			if err != nil {
				return err
			}
			if ttl < 0 {
				return fmt.Errorf("asynq server %s gone (TTL %s): no longer alive beside the killed pid %d", s.key, ttl, dead.Process.Pid)
			}
			if s.ttl >= 0 && ttl > s.ttl {
				s.beats++
			}
			s.ttl = ttl
		}
		for _, s := range alive {
			if s.beats < 3 {
				return fmt.Errorf("asynq server %s beat %d times since the kill, want 3", s.key, s.beats)
			}
		}
		return nil
	})
	after, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	was := map[string]float64{}
	for _, z := range before {
		was[z.Member.(string)] = z.Score
	}
	past := float64(time.Now().Add(-time.Hour).Unix())
	expired := 0
	for _, z := range after {
		id := z.Member.(string)
		if score, ok := was[id]; !ok || score != z.Score {
			continue // a live server's task: new since, or its lease extended
		}
		if err := rdb.ZAddXX(ctx, key, redis.Z{Score: past, Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
		expired++
	}
	t.Logf("expired the leases of the killed worker's %d active tasks in %s (of %d leases then, %d now)", expired, queue, len(before), len(after))
	return expired
}

func startProcess(t *testing.T, role string, env map[string]string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NEWSLETTER_TEST_MAIN="+role)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	log, _ := os.CreateTemp(t.TempDir(), strings.Fields(role)[0]+"-*.log")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// TestWorkerKilledMidDigest: SIGKILL a worker process while it sends a
// digest, start another, and every subscriber still gets exactly one mail
// (a duplicate only for a mail the killed worker had sent but not yet
// marked: at most its concurrency). The claim TTL is far longer than the
// test's deadline: the killed batches come back as retries of the same
// tasks and take over the claims their dead attempts held (a claim names
// its task), instead of waiting for them to expire.
func TestWorkerKilledMidDigest(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for asynq to recover the killed worker's tasks (about a minute)")
	}
	const subscribers, concurrency = 2000, 4
	rdb, redisURL := longTestRedis(t)
	smtpSrv := smtptest.Start(t)
	smtpSrv.SetDelay(2 * time.Millisecond)
	st := versionedStore(t, rdb)
	ctx := context.Background()
	readers := seedDigest(t, st, "k", subscribers)

	env := realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_CONCURRENCY": fmt.Sprint(concurrency), "NEWSLETTER_SEND_RATE": "100000",
		"NEWSLETTER_CLAIM_TTL": "30m", "NEWSLETTER_RETRY_BASE": "100ms", "NEWSLETTER_DIGEST_BATCH": "50",
	})
	env["NEWSLETTER_ADDR"] = freeAddr(t)
	first := startProcess(t, "worker", env)
	client := asynq.NewClientFromRedisClient(rdb)
	if _, err := tasks.EnqueueDigestPlan(ctx, client, "kill-1"); err != nil {
		t.Fatal(err)
	}
	poll.True(t, poll.BusyMachine, "the first worker to send some mail", func() bool { return len(smtpSrv.Messages()) >= 300 })
	if err := first.Process.Kill(); err != nil { // SIGKILL: no shutdown, no cleanup
		t.Fatal(err)
	}
	first.Wait()
	killedAt := len(smtpSrv.Messages())
	expireKilledLeases(t, rdb, first)

	env["NEWSLETTER_ADDR"] = freeAddr(t)
	startProcess(t, "worker", env)
	poll.True(t, poll.BusyMachine+recoverAfter, "every subscriber to get the digest", func() bool { return everyoneGotMail(smtpSrv, readers) })
	dups := len(smtpSrv.Messages()) - subscribers
	t.Logf("killed after %d mails; %d mails in all, %d duplicates", killedAt, len(smtpSrv.Messages()), dups)
	if dups > concurrency {
		t.Fatalf("%d duplicates, more than the killed worker's concurrency %d", dups, concurrency)
	}
	run, err := st.DigestRun(ctx, "kill-1")
	if err != nil || run.Sent != subscribers || run.State != store.RunPlanned {
		t.Fatalf("run %+v %v", run, err)
	}
}

// seedDigest adds n active subscribers (<prefix>0000@example.org, …) and
// one digest item, for a digest run; it returns the addresses.
func seedDigest(t testing.TB, st *store.Redis, prefix string, n int) []string {
	t.Helper()
	reqs := make([]store.SubscribeRequest, n)
	emails := make([]string, n)
	for i := range reqs {
		emails[i] = fmt.Sprintf("%s%04d@example.org", prefix, i)
		reqs[i] = store.SubscribeRequest{Email: emails[i], Activate: true, OnlyNew: true}
	}
	ctx := context.Background()
	if _, err := st.SubscribeMany(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddItem(ctx, store.Item{Title: "News", URL: "https://example.com/n"}); err != nil {
		t.Fatal(err)
	}
	return emails
}

// everyoneGotMail tells whether each address received at least one mail.
// It reads the server's messages once: asking srv.To per address copies
// them all per address, which at a few thousand addresses polled every
// few milliseconds takes the CPU the worker under test needs.
func everyoneGotMail(srv *smtptest.Server, emails []string) bool {
	got := map[string]bool{}
	for _, m := range srv.Messages() {
		for _, to := range m.To {
			got[strings.ToLower(to)] = true
		}
	}
	for _, e := range emails {
		if !got[strings.ToLower(e)] {
			return false
		}
	}
	return true
}
