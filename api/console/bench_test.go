package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/newsletter/newsletter/store"
)

// BenchmarkConsolePages measures the overview, a list page and a
// subscriber's page on a list of NEWSLETTER_BENCH_SUBSCRIBERS people
// (default 10,000; the figures in the docs use 1,000,000), seeded in
// pipelined batches on the real Redis. It reports p50 and p99 per page.
func BenchmarkConsolePages(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("NEWSLETTER_BENCH_SUBSCRIBERS")); err == nil && v > 0 {
		n = v
	}
	e := newEnv(b)
	ctx := context.Background()
	reqs := make([]store.SubscribeRequest, 0, 1000)
	for i := range n {
		reqs = append(reqs, store.SubscribeRequest{Email: fmt.Sprintf("p%07d@example.org", i), Activate: true, Topics: []string{"digest"}})
		if len(reqs) == cap(reqs) || i == n-1 {
			if _, err := e.st.SubscribeMany(ctx, reqs); err != nil {
				b.Fatal(err)
			}
			reqs = reqs[:0]
		}
	}
	for i := 0; i < 200; i++ {
		if err := e.st.MarkBounced(ctx, fmt.Sprintf("p%07d@example.org", i*(n/200))); err != nil {
			b.Fatal(err)
		}
	}
	br := e.signedIn(b, adminToken)
	sub, err := e.st.Get(ctx, fmt.Sprintf("p%07d@example.org", n/2))
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []struct{ name, path string }{
		{"overview", "/admin/"}, {"suppressions", "/admin/suppressions"}, {"subscriber", "/admin/subscribers/" + itoa(sub.ID)},
		{"find", "/admin/subscribers?q=" + sub.Email},
	} {
		b.Run(p.name, func(b *testing.B) {
			var times []time.Duration
			for b.Loop() {
				start := time.Now()
				got := br.get(p.path)
				times = append(times, time.Since(start))
				if got.code != http.StatusOK && got.code != http.StatusSeeOther {
					b.Fatalf("%s: %d", p.path, got.code)
				}
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
