package console_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/newsletter/newsletter/store/storetest"
)

// BenchmarkConsolePages measures the console's pages over HTTP on a list
// of NEWSLETTER_BENCH_SUBSCRIBERS people (default 10,000; the figures in
// the docs use 1,000,000), seeded as the store's BenchmarkPeople seeds
// it (storetest.SeedPeople) on the real Redis: the overview (counts and
// the 90-day chart), a list page (active, one topic, from a random
// place), a subscriber's page (their personal data) and a search by
// address. Each reports p50 and p99 in milliseconds.
//
//	NEWSLETTER_TEST_REDIS_URL=redis://127.0.0.1:6379/0 NEWSLETTER_BENCH_SUBSCRIBERS=1000000 \
//	  go test -run '^$' -bench BenchmarkConsolePages -benchtime 1000x ./api/console
func BenchmarkConsolePages(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("NEWSLETTER_BENCH_SUBSCRIBERS")); err == nil && v > 0 {
		n = v
	}
	e := newEnv(b)
	ctx := context.Background()
	start := time.Now()
	if err := storetest.SeedPeople(ctx, e.st, n); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d subscribers in %s", n, time.Since(start).Round(time.Second))
	// A hundred people to open, spread over the list.
	var ids []int64
	for i := 0; i < n; i += max(n/100, 1) {
		sub, err := e.st.Get(ctx, storetest.SeedAddress(i))
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, sub.ID)
	}
	br := e.signedIn(b, adminToken)
	for _, p := range []struct {
		name string
		req  func(r *rand.Rand) page
		want int
	}{
		{"overview", func(*rand.Rand) page { return br.get("/admin/") }, http.StatusOK},
		{"list", func(r *rand.Rand) page {
			return br.get("/admin/subscribers?status=active&topic=updates&after=" + strconv.Itoa(r.IntN(n)))
		}, http.StatusOK},
		{"subscriber", func(r *rand.Rand) page { return br.get("/admin/subscribers/" + itoa(ids[r.IntN(len(ids))])) }, http.StatusOK},
		{"find", func(r *rand.Rand) page {
			return br.post("/admin/subscribers/find", url.Values{"email": {storetest.SeedAddress(r.IntN(n))}})
		}, http.StatusSeeOther},
	} {
		b.Run(p.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			var times []time.Duration
			for b.Loop() {
				t0 := time.Now()
				got := p.req(r)
				times = append(times, time.Since(t0))
				if got.code != p.want {
					b.Fatalf("%s: %d", p.name, got.code)
				}
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
