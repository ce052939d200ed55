package store_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/store/storetest"
)

// BenchmarkPeople seeds a list (NEWSLETTER_BENCH_SUBSCRIBERS, default a
// million; storetest.SeedPeople says how it is made) through the store's
// own scripts, pipelined, then measures the console's reads:
// a list page (each filter), Stats over 90 days and one person's export.
// Each reports its p50 and p99 in milliseconds. It needs a real Redis
// (NEWSLETTER_TEST_REDIS_URL): the figures of an in-process one say
// nothing.
//
//	NEWSLETTER_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench BenchmarkPeople -benchtime 2000x ./store
func BenchmarkPeople(b *testing.B) {
	if os.Getenv(redistest.EnvURL) == "" {
		b.Skip("needs a real Redis: set " + redistest.EnvURL)
	}
	n := 1_000_000
	if v := os.Getenv("NEWSLETTER_BENCH_SUBSCRIBERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	rdb, _ := redistest.New(b, redistest.DBStore)
	s := store.NewRedis(rdb)
	ctx := context.Background()
	if err := s.CheckVersion(ctx, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := storetest.SeedPeople(ctx, s, n); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d subscribers in %s", n, time.Since(start).Round(time.Second))

	measure := func(b *testing.B, op func(r *rand.Rand) error) {
		r := rand.New(rand.NewPCG(1, 2))
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			if err := op(r); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
	for _, q := range []store.SubscriberQuery{
		{Limit: 50}, {Status: store.Active, Limit: 50}, {Topic: "updates", Limit: 50},
		{Status: store.Active, Topic: "updates", Limit: 50}, {Status: store.Bounced, Limit: 50}, {Status: store.Bounced, Topic: "updates", Limit: 50},
	} {
		name := fmt.Sprintf("list/status=%s/topic=%s", q.Status, q.Topic)
		b.Run(name, func(b *testing.B) {
			measure(b, func(r *rand.Rand) error {
				q := q
				q.After = r.Int64N(int64(n))
				_, err := s.ListSubscribers(ctx, q)
				return err
			})
		})
	}
	b.Run("stats/days=90", func(b *testing.B) {
		measure(b, func(*rand.Rand) error { _, err := s.Stats(ctx, 90); return err })
	})
	b.Run("export", func(b *testing.B) {
		measure(b, func(r *rand.Rand) error {
			_, err := s.PersonalData(ctx, storetest.SeedAddress(r.IntN(n)))
			return err
		})
	})
}
