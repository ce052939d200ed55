package pace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
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

// TestLaneRatesAreSeparate: each lane takes from its own rate under its own
// key; the e-mail lane keeps the key it had before lanes (nl:pace:send),
// so New and NewLane("email") share one rate.
func TestLaneRatesAreSeparate(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBPace)
	ctx := context.Background()
	for lane, want := range map[string]string{"email": "nl:pace:send", "push": "nl:pace:lane:push", "webhook": "nl:pace:lane:webhook"} {
		if got := LaneKey(lane); got != want {
			t.Errorf("LaneKey(%s) = %s, want %s", lane, got, want)
		}
	}
	if New(rdb, 10).key != NewLane(rdb, "email", 10).key {
		t.Fatal("New and NewLane(email) pace under different keys")
	}
	// A rate of 1 per second has a burst of 1: a second take within the
	// second is refused. A round that took longer than the second (a busy
	// machine) proves nothing and is run again on a fresh lane.
	for round := 0; ; round++ {
		if round == 20 {
			t.Fatal("20 rounds each took longer than a second")
		}
		lane := fmt.Sprintf("push%d", round)
		start := time.Now()
		push := NewLane(rdb, lane, 1)
		if n, _, err := push.TakeN(ctx, 1); err != nil || n != 1 {
			t.Fatalf("first %s slot: %d %v", lane, n, err)
		}
		n, _, err := push.TakeN(ctx, 1)
		// Spent push rate leaves e-mail's and webhook's untouched.
		email, _, err1 := New(rdb, 1).TakeN(ctx, 1)
		webhook, _, err2 := NewLane(rdb, "webhook", 1).TakeN(ctx, 1)
		keys, err3 := rdb.Keys(ctx, "rate:nl:pace:*").Result()
		if err := errors.Join(err, err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) >= 900*time.Millisecond {
			rdb.FlushDB(ctx)
			continue
		}
		if n != 0 {
			t.Fatalf("a second %s slot within the second was granted", lane)
		}
		if email != 1 || webhook != 1 {
			t.Fatalf("after %s spent its rate: e-mail got %d, webhook %d slots; want 1 each", lane, email, webhook)
		}
		slices.Sort(keys)
		if want := []string{"rate:nl:pace:lane:" + lane, "rate:nl:pace:lane:webhook", "rate:nl:pace:send"}; !slices.Equal(keys, want) {
			t.Fatalf("rate keys %v, want %v", keys, want)
		}
		return
	}
}
