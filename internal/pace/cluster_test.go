package pace

import (
	"context"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
)

// TestPaceOnCluster: the shared rates and the domain pauses work on a Redis
// Cluster through the client the service makes for one (redisconn.Client).
// Each of their scripts names one key (redis_rate's "rate:"+key, the
// throttle's domain key), so no script crosses slots; the lanes' rates sit
// on keys of their own, on whichever primaries.
func TestPaceOnCluster(t *testing.T) {
	t.Parallel()
	c := rediscluster.Start(t)
	rdb, err := redisconn.Client(redisconn.Cluster{Addrs: c.Addrs()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rdb.Close(); err != nil {
			t.Logf("close: %v", err)
		}
	})
	ctx := context.Background()

	start := time.Now()
	l := New(rdb, 100) // burst 10
	granted, wait, err := l.TakeN(ctx, 50)
	if most := allowed(100, 10, time.Since(start)); err != nil || granted < 10 || granted > most || wait != 0 {
		t.Fatalf("granted %d of 50 (wait %s, %v), want the burst of 10 (at most %d)", granted, wait, err, most)
	}
	for _, lane := range []string{"push", "webhook"} {
		if n, _, err := NewLane(rdb, lane, 1).TakeN(ctx, 1); err != nil || n != 1 {
			t.Fatalf("lane %s, its own rate: %d granted, %v", lane, n, err)
		}
	}
	if n, _, err := NewConfirmations(rdb, 60).TakeN(ctx, 1); err != nil || n != 1 {
		t.Fatalf("confirmations: %d granted, %v", n, err)
	}

	if err := l.Throttle(ctx, "gmail.com", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Throttle(ctx, "gmail.com", time.Second); err != nil { // must not shorten it
		t.Fatal(err)
	}
	d, err := l.DomainWait(ctx, "gmail.com")
	if least := time.Minute - time.Since(start) - time.Second; err != nil || d < least || d > time.Minute {
		t.Fatalf("pause %s (%v), want between %s and a minute", d, err, least)
	}
	if d, err := l.DomainWait(ctx, "yahoo.com"); err != nil || d != 0 {
		t.Fatalf("another domain paused: %s %v", d, err)
	}
}
