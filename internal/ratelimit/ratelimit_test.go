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
