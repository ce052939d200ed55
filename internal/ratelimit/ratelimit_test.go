package ratelimit

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	l := New(3, time.Minute, func() time.Time { return now })
	if blocked, _ := l.Blocked("a"); blocked {
		t.Fatal("a key never seen is blocked")
	}
	for i := 0; i < 3; i++ {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("event %d of 3 refused", i+1)
		}
	}
	if ok, wait := l.Allow("a"); ok || wait <= 0 || wait > 20*time.Second {
		t.Fatalf("the fourth event: allowed %v, wait %s (want about 20s)", ok, wait)
	}
	if blocked, wait := l.Blocked("a"); !blocked || wait <= 0 {
		t.Fatalf("after the limit: blocked %v, wait %s", blocked, wait)
	}
	if blocked, _ := l.Blocked("b"); blocked {
		t.Fatal("another key is blocked")
	}
	now = now.Add(21 * time.Second) // one event refilled
	if blocked, _ := l.Blocked("a"); blocked {
		t.Fatal("still blocked after a refill")
	}
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("the refilled event was refused")
	}
}

// TestReserve: events that are willing to wait take the turns after the
// burst one after another, never more than maxWait ahead; one that would
// wait longer is not counted.
func TestReserve(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	l := New(3, time.Minute, func() time.Time { return now }) // a turn every 20s
	for i := 0; i < 3; i++ {
		if wait, ok := l.Reserve("a", time.Minute); !ok || wait != 0 {
			t.Fatalf("event %d of the burst: wait %s, counted %v", i+1, wait, ok)
		}
	}
	for i, want := range []time.Duration{20 * time.Second, 40 * time.Second} {
		if wait, ok := l.Reserve("a", 45*time.Second); !ok || wait != want {
			t.Fatalf("waiting event %d: wait %s, counted %v; want %s", i+1, wait, ok, want)
		}
	}
	if wait, ok := l.Reserve("a", 45*time.Second); ok || wait != time.Minute {
		t.Fatalf("an event a minute away with maxWait 45s: wait %s, counted %v", wait, ok)
	}
	// The refused one took no turn: 20s later the next turn is 40s away.
	now = now.Add(20 * time.Second)
	if wait, ok := l.Reserve("a", 45*time.Second); !ok || wait != 40*time.Second {
		t.Fatalf("after 20s: wait %s, counted %v; want 40s", wait, ok)
	}
}
