package pace

import (
	"context"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/redistest"
)

func TestDomainThrottle(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBPace)
	l := New(rdb, 10)
	ctx := context.Background()
	if d, err := l.DomainWait(ctx, "gmail.com"); err != nil || d != 0 {
		t.Fatalf("fresh domain paused: %s %v", d, err)
	}
	l.Throttle(ctx, "gmail.com", time.Minute)
	l.Throttle(ctx, "gmail.com", time.Second) // must not shorten it
	d, _ := l.DomainWait(ctx, "gmail.com")
	if d < 50*time.Second || d > time.Minute {
		t.Fatalf("pause %s, want about a minute", d)
	}
	if d, _ := l.DomainWait(ctx, "yahoo.com"); d != 0 {
		t.Fatal("another domain was paused")
	}
}

func TestTakeBurstIsSmall(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBPace)
	l := New(rdb, 100)
	ctx := context.Background()
	granted := 0
	for i := 0; i < 100; i++ {
		if n, _, err := l.TakeN(ctx, 1); err != nil {
			t.Fatal(err)
		} else {
			granted += n
		}
	}
	// A burst of a tenth of a second (10) plus what the clock adds while
	// the loop runs; never the full second's 100.
	if granted < 10 || granted > 40 {
		t.Fatalf("%d of 100 immediate requests granted at 100/s", granted)
	}
}

func TestTakeN(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBPace)
	l := New(rdb, 100) // burst 10
	granted, wait, err := l.TakeN(context.Background(), 50)
	if err != nil || granted < 10 || granted > 20 || wait != 0 {
		t.Fatalf("granted %d of 50 (wait %s, %v), want about the burst of 10", granted, wait, err)
	}
	if granted, wait, _ := l.TakeN(context.Background(), 50); granted > 5 || (granted == 0 && wait <= 0) {
		t.Fatalf("right after the burst: %d granted, wait %s", granted, wait)
	}
}
