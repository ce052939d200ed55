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
	start := time.Now()
	if err := l.Throttle(ctx, "gmail.com", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Throttle(ctx, "gmail.com", time.Second); err != nil { // must not shorten it
		t.Fatal(err)
	}
	d, err := l.DomainWait(ctx, "gmail.com")
	// What is left of the minute: less only by the time the test took.
	if least := time.Minute - time.Since(start) - time.Second; err != nil || d < least || d > time.Minute {
		t.Fatalf("pause %s (%v), want between %s and a minute", d, err, least)
	}
	if d, _ := l.DomainWait(ctx, "yahoo.com"); d != 0 {
		t.Fatal("another domain was paused")
	}
}

// allowed is the most a GCRA at rate per second with burst may grant over
// elapsed: the burst plus what the clock refilled (plus one for rounding).
// The bound grows with the time the loop took, so a slow machine widens it
// instead of failing the test.
func allowed(rate, burst int, elapsed time.Duration) int {
	return burst + int(elapsed.Seconds()*float64(rate)) + 1
}

func TestBurstIsATenthOfTheRate(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBPace)
	for rate, want := range map[int]int{100: 10, 50: 5, 5: 1} {
		if got := New(rdb, rate).limit.Burst; got != want {
			t.Errorf("rate %d/s: burst %d, want %d", rate, got, want)
		}
	}
}

func TestTakeBurstIsSmall(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBPace)
	l := New(rdb, 100)
	ctx := context.Background()
	start := time.Now()
	granted := 0
	for i := 0; i < 100; i++ {
		n, _, err := l.TakeN(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		granted += n
	}
	// A burst of a tenth of a second (10) plus what the clock adds while
	// the loop runs; never the full second's 100 at once.
	if most := allowed(100, 10, time.Since(start)); granted < 10 || granted > most {
		t.Fatalf("%d of 100 immediate requests granted at 100/s, want 10 to %d", granted, most)
	}
}

func TestTakeN(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBPace)
	l := New(rdb, 100) // burst 10
	ctx := context.Background()
	start := time.Now()
	granted, wait, err := l.TakeN(ctx, 50)
	if most := allowed(100, 10, time.Since(start)); err != nil || granted < 10 || granted > most || wait != 0 {
		t.Fatalf("granted %d of 50 (wait %s, %v), want the burst of 10 (at most %d)", granted, wait, err, most)
	}
	again, wait, err := l.TakeN(ctx, 50)
	if most := allowed(100, 10, time.Since(start)); err != nil || granted+again > most || (again == 0 && wait <= 0) {
		t.Fatalf("right after the burst: %d more granted (at most %d in all), wait %s, %v", again, most, wait, err)
	}
}
