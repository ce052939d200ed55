// Command list is `make bench-list` (issue #32): N subscribers (default
// 1,000,000) seeded through the store's bulk path into the Redis at
// REDIS_URL, then the prefix search's latency (p50, p99 over QUERIES
// searches of 50, prefixes of addresses and of names, shallow and broad)
// and the CSV export of the whole list: rows a second, and the process's
// peak heap and RSS, which must stay flat (the export streams in pages).
//
// It writes to REDIS_URL's database and flushes it first: point it at a
// Redis of its own (`redis-server --port 6393 --save "" --appendonly no`,
// REDIS_URL=redis://127.0.0.1:6393/15).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/store/storetest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-list:", err)
		os.Exit(1)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func run() error {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		return fmt.Errorf("REDIS_URL is not set: start a Redis of its own (redis-server --port 6393 --save \"\" --appendonly no) and set REDIS_URL=redis://127.0.0.1:6393/15; the benchmark flushes that database")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	ctx := context.Background()
	n, queries := envInt("N", 1_000_000), envInt("QUERIES", 2000)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := store.NewRedis(rdb)

	// Seed, unless this database already holds the same list.
	seeded, _ := rdb.Get(ctx, "bench:list:n").Int()
	if seeded != n {
		if err := rdb.FlushDB(ctx).Err(); err != nil {
			return err
		}
		if err := st.CheckVersion(ctx, log); err != nil {
			return err
		}
		t0 := time.Now()
		if err := storetest.SeedPeople(ctx, st, n); err != nil {
			return err
		}
		d := time.Since(t0)
		fmt.Printf("seeded %d subscribers in %s (%.0f/s, the search index kept by the same scripts)\n", n, d.Round(time.Millisecond), float64(n)/d.Seconds())
		if err := rdb.Set(ctx, "bench:list:n", n, 0).Err(); err != nil {
			return err
		}
	} else {
		fmt.Printf("reusing the %d subscribers seeded before\n", n)
	}
	if mem, err := rdb.Info(ctx, "memory").Result(); err == nil {
		for l := range strings.SplitSeq(mem, "\n") {
			if strings.HasPrefix(l, "used_memory_human:") {
				fmt.Printf("redis %s\n", strings.TrimSpace(l))
			}
		}
	}

	// Search: a mix of narrow prefixes (an address's start, a number in
	// a name) and broad ones (every name's "reader"), first pages of 50.
	rng := rand.New(rand.NewPCG(1, 2))
	var lat []time.Duration
	var found int64
	for i := range queries {
		var q string
		switch i % 4 {
		case 0:
			q = storetest.SeedAddress(rng.IntN(n))[:7] // p000123…: some hundred addresses
		case 1:
			q = storetest.SeedAddress(rng.IntN(n)) // one address
		case 2:
			q = strconv.Itoa(rng.IntN(n)) // a name's number, and every number it begins
		default:
			q = "reader" // every name
		}
		t0 := time.Now()
		page, err := st.Search(ctx, store.SearchQuery{Q: q, Limit: 50})
		if err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
		found += int64(len(page.Subscribers))
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	fmt.Printf("search: %d queries of 50, p50 %s, p99 %s, max %s (target p99 < 50ms); %d people listed\n",
		len(lat), pct(0.5).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond), found)

	// Export: the whole list as the worker runs it, with the heap and RSS
	// watched.
	jobs := listjobs.NewJobs(rdb)
	runner := &listjobs.Runner{Jobs: jobs, Store: st, Now: time.Now, Log: log,
		Applier: &listjobs.Applier{Store: st, Topics: topics.Default(0)}}
	job, err := jobs.Create(ctx, listjobs.Job{Kind: listjobs.KindExport, Total: int64(n), Created: time.Now()})
	if err != nil {
		return err
	}
	runtime.GC()
	var peakHeap atomic.Uint64
	stop := make(chan struct{})
	go func() {
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peakHeap.Load() {
				peakHeap.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t0 := time.Now()
	if err := runner.Run(ctx, job.ID); err != nil {
		return err
	}
	d := time.Since(t0)
	close(stop)
	job, err = jobs.Get(ctx, job.ID)
	if err != nil {
		return err
	}
	fmt.Printf("export: %d rows, %d MB in %d chunks, in %s: %.0f rows/s (target >= 50000); peak heap in use %d MB, peak RSS %s\n",
		job.Done, job.Bytes>>20, job.Chunks, d.Round(time.Millisecond), float64(job.Done)/d.Seconds(), peakHeap.Load()>>20, peakRSS())
	// The download, chunk by chunk.
	t0 = time.Now()
	var bytes int64
	for i := range job.Chunks {
		b, err := jobs.Chunk(ctx, job.ID, i)
		if err != nil {
			return err
		}
		bytes += int64(len(b))
	}
	fmt.Printf("download: %d MB read back in %s\n", bytes>>20, time.Since(t0).Round(time.Millisecond))
	return rdb.Del(ctx, "{nl:listjob:"+job.ID+"}", "{nl:listjob:"+job.ID+"}:csv").Err()
}

// peakRSS is the process's peak resident set (VmHWM), where Linux says.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
