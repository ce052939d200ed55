// Command scale is `make bench-scale N=10000000` (issue #30): the store
// and the service on a Redis Cluster as the list grows to N subscribers,
// beside a single Redis holding the same list, in one run.
//
// It starts a local Redis Cluster (3 primaries, 3 replicas) and a single
// Redis with a replica from redis-server (nodes.go), then grows the list on both through
// the store's bulk path (store.Redis.SubscribeMany, IMPORT_WORKERS
// goroutines of IMPORT_BATCH requests; active, every UPDATES_ONLY-th
// reader with the updates topic only, the others digest and updates, as
// in bench-digest). At each of CHECKPOINTS (capped at N; N itself is
// always one) it measures, on the cluster and then on the single Redis:
//
//   - the import rate of the stretch since the last checkpoint;
//   - Redis memory per subscriber: used_memory summed over the primaries,
//     less the empty cluster's and less the replication buffers, over the
//     subscribers (the replicas hold a copy as large again);
//   - the time to plan an issue to all of them: the audience count
//     (store.IssueAudience) and the planner's keyset walk shard by shard
//     (AudienceByShard, ten pages of worker.DefaultDigestBatch ids a
//     read), in ns per reader;
//   - Redis CPU per mail at full send speed (send.go): an issue to the
//     digest topic sent by a `newsletter serve` of this tree into a
//     loopback SMTP sink, measured over a window after a warm-up, per
//     primary and summed, then cancelled through the API.
//
// SINGLE_MAX caps the single Redis's list (default N; 0: no single
// Redis): past it, the single Redis is left out of the checkpoints.
// PORT_BASE (default 7800) places every port the run opens (nodes.go;
// the service at base+30, the sink at base+31). A send window opens after
// WARMUP mails (default 20000, at most a tenth of the audience) and holds
// MAILS mails (default 300000) or WINDOW (default 60s); IDLE (default 5s)
// is how long the idle floor is measured before each send. The settings
// are saved with a postal address first, as an operator does: bulk mail
// is refused without one.
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/worker"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

func warn(what string, err error) { bench.Warn(what, err) }

// config is what the environment asks of a run.
type config struct {
	n           int
	checkpoints []int
	every       int // every every-th reader has updates only; 0: none
	singleMax   int
	workers     int
	batch       int
	portBase    int
	mails       int64         // a send window's mails at most (MAILS)
	window      time.Duration // and its time at most (WINDOW)
	warmup      int64         // mails before the window opens (WARMUP)
	idle        time.Duration // the idle floor's measure before each send (IDLE)
}

func readConfig() (config, error) {
	c := config{n: 1000000, every: 5, workers: 4, batch: 1000, portBase: 7800, mails: 300000, window: 60 * time.Second, warmup: 20000, idle: 5 * time.Second}
	num := func(name string, into *int, lo int) error {
		v := os.Getenv(name)
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo {
			return fmt.Errorf("%s=%q: want a whole number from %d", name, v, lo)
		}
		*into = n
		return nil
	}
	var mails, warmup int
	mails, warmup = int(c.mails), int(c.warmup)
	for _, e := range []struct {
		name string
		into *int
		lo   int
	}{{"N", &c.n, 1}, {"UPDATES_ONLY", &c.every, 0}, {"IMPORT_WORKERS", &c.workers, 1}, {"IMPORT_BATCH", &c.batch, 1},
		{"PORT_BASE", &c.portBase, 1024}, {"MAILS", &mails, 1}, {"WARMUP", &warmup, 0}} {
		if err := num(e.name, e.into, e.lo); err != nil {
			return c, err
		}
	}
	c.mails, c.warmup = int64(mails), int64(warmup)
	c.singleMax = c.n
	if err := num("SINGLE_MAX", &c.singleMax, 0); err != nil {
		return c, err
	}
	for _, e := range []struct {
		name string
		into *time.Duration
	}{{"WINDOW", &c.window}, {"IDLE", &c.idle}} {
		if v := os.Getenv(e.name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return c, fmt.Errorf("%s=%q: want a duration such as 5s", e.name, v)
			}
			*e.into = d
		}
	}
	for _, f := range strings.Split(cmp.Or(os.Getenv("CHECKPOINTS"), "1000000,2000000,5000000,10000000"), ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			return c, fmt.Errorf("CHECKPOINTS=%q: want subscriber counts such as 1000000,2000000", os.Getenv("CHECKPOINTS"))
		}
		if k < c.n {
			c.checkpoints = append(c.checkpoints, k)
		}
	}
	c.checkpoints = append(c.checkpoints, c.n)
	slices.Sort(c.checkpoints)
	c.checkpoints = slices.Compact(c.checkpoints)
	return c, nil
}

// audience is how many of the first n readers have the digest topic.
func (c config) audience(n int) int {
	if c.every == 0 {
		return n
	}
	return n - (n+c.every-1)/c.every
}

// target is one of the two Redis set-ups under test.
type target struct {
	name      string
	rdb       redis.UniversalClient
	st        *store.Redis
	env       []string  // how the service's processes reach it
	primaries []*server // the servers that hold the data
	replicas  []*server
	baseMem   int64 // their data memory when empty (memOf)
	imported  int   // subscribers written so far
}

// row is one target's figures at one checkpoint.
type row struct {
	target     string
	n          int
	importRate float64 // rows/s of the stretch since the last checkpoint
	importTook time.Duration
	importCPU  [3]time.Duration // per row: the primaries', the replicas', this process's (the store's client)
	memPerSub  float64
	memPrimary []int64 // each primary's data memory over its empty self
	audience   int64
	countTook  time.Duration
	walked     int
	walkTook   time.Duration
	walkPages  int
	send       *sendFigures // nil: not measured
	memResidue int64        // what the send left in Redis (tasks, marks)
}

func run() error {
	cfg, err := readConfig()
	if err != nil {
		return err
	}
	// Ctrl-C or a TERM ends the run through the deferred clean-ups: the
	// servers and the service are stopped, not left behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Printf("bench-scale: N=%d, checkpoints %v, single Redis up to %d; started %s\n", cfg.n, cfg.checkpoints, cfg.singleMax, time.Now().Format(time.RFC3339))
	srv, err := startServers(ctx, cfg.portBase)
	if err != nil {
		return err
	}
	defer srv.stop()
	bin, cleanup, err := bench.BuildBinary()
	if err != nil {
		return err
	}
	defer cleanup()
	sink, err := bench.StartSinkAt(fmt.Sprintf("127.0.0.1:%d", cfg.portBase+31))
	if err != nil {
		return err
	}
	defer sink.Close()

	cluster, single, err := targets(ctx, srv, cfg)
	if err != nil {
		return err
	}
	defer func() { warn("close cluster client", cluster.rdb.Close()) }()
	all := []*target{cluster}
	if single != nil {
		defer func() { warn("close single client", single.rdb.Close()) }()
		all = append(all, single)
	}
	h := &sender{bin: bin, sink: sink, cfg: cfg, addr: fmt.Sprintf("127.0.0.1:%d", cfg.portBase+30)}
	var rows []row
	for _, cp := range cfg.checkpoints {
		for _, t := range all {
			if t == single && cp > cfg.singleMax {
				continue
			}
			r, err := checkpoint(ctx, cfg, h, t, cp)
			if err != nil {
				return fmt.Errorf("%s at %d: %w", t.name, cp, err)
			}
			rows = append(rows, r)
			printRow(r)
		}
	}
	if p, err := srv.primaries(ctx); err != nil || !slices.Equal(p, cluster.primaries) {
		return fmt.Errorf("the cluster's primaries changed during the run (a failover?): the per-primary figures mix nodes (%v)", err)
	}
	printTables(cfg, rows)
	return nil
}

// targets connects to the cluster and the single Redis as the service
// does (redisconn), stamps their data version as a role's start-up
// would, and records their empty memory.
func targets(ctx context.Context, srv *servers, cfg config) (cluster, single *target, err error) {
	seeds := srv.seeds()
	opt, err := redisconn.ParseCluster(seeds, "")
	if err != nil {
		return nil, nil, err
	}
	crdb, err := redisconn.Client(opt, 4*cfg.workers)
	if err != nil {
		return nil, nil, err
	}
	prim, err := srv.primaries(ctx)
	if err != nil {
		return nil, nil, err
	}
	repl, err := srv.replicas(ctx)
	if err != nil {
		return nil, nil, err
	}
	cluster = &target{name: "cluster", rdb: crdb, st: store.NewRedis(crdb), primaries: prim, replicas: repl,
		env: []string{"NEWSLETTER_REDIS_CLUSTER_ADDRS=" + seeds}}
	list := []*target{cluster}
	if cfg.singleMax > 0 {
		srdb, err := redisconn.Client(asynq.RedisClientOpt{Addr: srv.single.addr()}, 4*cfg.workers)
		if err != nil {
			return nil, nil, err
		}
		single = &target{name: "single", rdb: srdb, st: store.NewRedis(srdb), primaries: []*server{srv.single}, replicas: []*server{srv.singleReplica},
			env: []string{"NEWSLETTER_REDIS_URL=redis://" + srv.single.addr() + "/0"}}
		list = append(list, single)
	}
	for _, t := range list {
		if err := t.st.CheckVersion(ctx, discardLog()); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", t.name, err)
		}
		if err := bench.SaveSettings(ctx, t.st, "the "+t.name+" Redis"); err != nil {
			return nil, nil, err
		}
		if t.baseMem, _, err = dataMem(ctx, t); err != nil {
			return nil, nil, err
		}
	}
	return cluster, single, nil
}

// dataMem sums memOf over t's primaries, and returns each.
func dataMem(ctx context.Context, t *target) (int64, []int64, error) {
	var sum int64
	var each []int64
	for _, s := range t.primaries {
		m, _, err := memOf(ctx, s)
		if err != nil {
			return 0, nil, err
		}
		sum += m
		each = append(each, m)
	}
	return sum, each, nil
}

// checkpoint grows t's list to n and measures it.
func checkpoint(ctx context.Context, cfg config, h *sender, t *target, n int) (row, error) {
	r := row{target: t.name, n: n}
	from := t.imported
	cpu0, err := importCPU(ctx, t)
	if err != nil {
		return r, err
	}
	start := time.Now()
	if err := importRange(ctx, cfg, t.st, from, n); err != nil {
		return r, err
	}
	t.imported = n
	r.importTook = time.Since(start)
	r.importRate = float64(n-from) / r.importTook.Seconds()
	cpu1, err := importCPU(ctx, t)
	if err != nil {
		return r, err
	}
	for i := range cpu1 {
		r.importCPU[i] = (cpu1[i] - cpu0[i]) / time.Duration(n-from)
	}
	mem, each, err := dataMem(ctx, t)
	if err != nil {
		return r, err
	}
	r.memPerSub = float64(mem-t.baseMem) / float64(n)
	r.memPrimary = each

	want := int64(cfg.audience(n))
	start = time.Now()
	if r.audience, err = t.st.IssueAudience(ctx, []string{topics.Digest}); err != nil {
		return r, err
	}
	r.countTook = time.Since(start)
	if r.audience != want {
		return r, fmt.Errorf("the audience count is %d, the run wrote %d readers of the digest topic", r.audience, want)
	}
	start = time.Now()
	if r.walked, r.walkPages, err = walk(ctx, t.st); err != nil {
		return r, err
	}
	r.walkTook = time.Since(start)
	if int64(r.walked) != want {
		return r, fmt.Errorf("the planner's walk found %d readers, the run wrote %d readers of the digest topic", r.walked, want)
	}

	if r.send, err = h.measure(ctx, t, int64(r.audience)); err != nil {
		return r, err
	}
	after, _, err := dataMem(ctx, t)
	if err != nil {
		return r, err
	}
	r.memResidue = after - mem
	return r, nil
}

// importCPU is the CPU t's primaries, its replicas and this process
// have spent so far: where an import's time goes on shared cores.
func importCPU(ctx context.Context, t *target) ([3]time.Duration, error) {
	var out [3]time.Duration
	for i, list := range [][]*server{t.primaries, t.replicas} {
		for _, s := range list {
			c, err := cpuOf(ctx, s)
			if err != nil {
				return out, err
			}
			out[i] += c
		}
	}
	var err error
	out[2], err = bench.ProcCPU(os.Getpid())
	return out, err
}

// walk reads the digest topic's audience as the issue planner does
// (AudienceByShard, shard by shard, worker.LookaheadPages pages of
// worker.DefaultDigestBatch ids a read, the cursor the last id's walk
// key), counting the readers in pages, and checks they come in walk-key
// order.
func walk(ctx context.Context, st *store.Redis) (readers, pages int, err error) {
	cursor := int64(0)
	for {
		ids, err := st.AudienceByShard(ctx, []string{topics.Digest}, cursor, worker.DefaultDigestBatch*worker.LookaheadPages)
		if err != nil {
			return readers, pages, err
		}
		pages += max(1, (len(ids)+worker.DefaultDigestBatch-1)/worker.DefaultDigestBatch)
		if len(ids) == 0 {
			return readers, pages, nil
		}
		keys := make([]int64, len(ids))
		for i, id := range ids {
			keys[i] = store.WalkKey(id)
		}
		if keys[0] <= cursor || !slices.IsSorted(keys) {
			return readers, pages, fmt.Errorf("read after walk key %d is not in walk-key order", cursor)
		}
		readers += len(ids)
		cursor = keys[len(keys)-1]
	}
}

// importRange writes readers from..n-1 through SubscribeMany, in
// batches shared out to cfg.workers goroutines. Every request must
// succeed: the addresses are new.
func importRange(ctx context.Context, cfg config, st *store.Redis, from, n int) error {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make([]error, cfg.workers)
	both, updatesOnly := []string{topics.Digest, topics.Updates}, []string{topics.Updates}
	for w := range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs := make([]store.SubscribeRequest, 0, cfg.batch)
			for ctx.Err() == nil {
				lo := int(next.Add(int64(cfg.batch))) - cfg.batch
				if lo >= n {
					return
				}
				reqs = reqs[:0]
				for i := lo; i < min(lo+cfg.batch, n); i++ {
					tp := both
					if cfg.every > 0 && i%cfg.every == 0 {
						tp = updatesOnly
					}
					reqs = append(reqs, store.SubscribeRequest{Email: fmt.Sprintf("reader%08d@example.org", i), Name: "Reader " + strconv.Itoa(i),
						Activate: true, OnlyNew: true, Topics: tp, Source: store.SourceImport})
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
	return ctx.Err()
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// printRow is one checkpoint's line, as it is measured: a long run shows
// its progress.
func printRow(r row) {
	fmt.Printf("%s %s at %d: import %s (%.0f rows/s; CPU per row: Redis primaries %.1f µs, replicas %.1f µs, client %.1f µs), %.1f B/subscriber, audience %d counted in %s, walk of %d pages %s",
		time.Now().Format("15:04:05"), r.target, r.n, r.importTook.Round(time.Millisecond), r.importRate,
		us(r.importCPU[0], 1), us(r.importCPU[1], 1), us(r.importCPU[2], 1), r.memPerSub, r.audience,
		r.countTook.Round(time.Microsecond), r.walkPages, r.walkTook.Round(time.Millisecond))
	if s := r.send; s != nil {
		fmt.Printf(", push fan-out done %s after the send (%d mails by then)", s.fanoutTook.Round(time.Millisecond), s.before)
		fmt.Printf(", send %d mails in %s (%.0f/s): Redis %.1f µs/mail (%s; idle floor %.1f µs), service %.1f µs/mail; Redis %s",
			s.mails, s.took.Round(time.Millisecond), s.rate(), us(s.redisSum(), s.mails), s.perPrimary(), us(s.idlePerMail(), 1),
			us(s.serviceCPU, s.mails), s.stats.PerMail(s.mails, 6))
	}
	fmt.Println()
}

func us(d time.Duration, mails int64) float64 {
	if mails == 0 {
		return 0
	}
	return float64(d.Nanoseconds()) / 1000 / float64(mails)
}

// printTables prints the figures as Markdown tables, for
// docs/performance.md.
func printTables(cfg config, rows []row) {
	fmt.Println()
	fmt.Println("| subscribers | Redis | import rows/s (this stretch) | memory per subscriber | per primary (MB over empty) | audience count | ns per reader | planner walk (shard by shard, reads of 1,000) | ns per reader |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rows {
		var each []string
		for _, m := range r.memPrimary {
			each = append(each, fmt.Sprintf("%.0f", mb(m)))
		}
		fmt.Printf("| %s | %s | %s | %.1f B | %s | %s | %.1f | %s | %.0f |\n", group(int64(r.n)), r.target, group(int64(r.importRate)), r.memPerSub,
			strings.Join(each, " / "), dur(r.countTook), float64(r.countTook.Nanoseconds())/float64(r.audience),
			dur(r.walkTook), float64(r.walkTook.Nanoseconds())/float64(r.walked))
	}
	fmt.Println()
	fmt.Println("| subscribers | Redis | push fan-out of the issue | mails in window | mails/s | Redis CPU per mail (sum of primaries) | per primary | of which idle floor | replicas' CPU per mail | service CPU per mail | Redis requests / commands per mail | left in Redis after |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rows {
		s := r.send
		if s == nil {
			continue
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %.1f µs | %s | %.1f µs | %.1f µs | %.1f µs | %.3f / %.2f | %+.1f MB |\n", group(int64(r.n)), r.target, dur(s.fanoutTook), group(s.mails), group(int64(s.rate())),
			us(s.redisSum(), s.mails), s.perPrimary(), us(s.idlePerMail(), 1), us(s.replicaCPU, s.mails), us(s.serviceCPU, s.mails),
			float64(s.stats.Reads)/float64(s.mails), float64(s.commands())/float64(s.mails), mb(r.memResidue))
	}
	fmt.Println()
	// The issue's comparison: the cluster's Redis CPU per mail (summed
	// over its primaries) against the single Redis's at the same size.
	for _, r := range rows {
		if r.target != "cluster" || r.send == nil {
			continue
		}
		for _, o := range rows {
			if o.target == "single" && o.n == r.n && o.send != nil {
				c, s := us(r.send.redisSum(), r.send.mails), us(o.send.redisSum(), o.send.mails)
				fmt.Printf("at %s: cluster %.1f µs, single %.1f µs of Redis CPU per mail: cluster/single %.2f (target ≤ 1.20)\n", group(int64(r.n)), c, s, c/s)
			}
		}
	}
	fmt.Printf("Memory: the primaries' used_memory less the replication buffers, over the empty set-up; each replica holds a copy as large again (a cluster of 3+3 needs twice the figure). The service ran with concurrency 16 and 16 SMTP connections; a window opens once the issue's push fan-out (one EXISTS a reader, in the push lane, unpaced by the mails) is done and %d mails went, and closes %d mails or %s later.\n",
		cfg.warmup, cfg.mails, cfg.window)
}

func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// group writes n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
