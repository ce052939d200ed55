package worker

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/testkit/redisfault"
	"github.com/newsletter/newsletter/store"
)

// TestMarkWindowBoundsUnmarkedMails: while marks cannot be written, no more
// than the window of mails may be sent; once they are, the senders go on,
// and the marks went in shared round trips.
func TestMarkWindowBoundsUnmarkedMails(t *testing.T) {
	mem, away := newAwayStore(t)
	away.Hang() // a slow or hung Redis: the marks wait for it
	// No linger: only a full window or a waiting sender sends the marks,
	// so what goes together does not depend on this machine's speed.
	w := newMarkWriter(mem, 3, time.Hour, redisconn.Wait{Log: discard})
	defer w.close()
	ctx := context.Background()
	var done sync.WaitGroup
	for i := int64(1); i <= 3; i++ {
		if err := w.acquire(ctx); err != nil {
			t.Fatalf("slot %d of 3: %v", i, err)
		}
		w.add(store.Mark{Kind: "digest", Key: "p", SubscriberID: i, Shared: true}, &done)
	}
	// The window is full and nothing can be written: a fourth send must
	// not start (a cancelled context shows it would have waited).
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := w.acquire(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("a fourth mail could be sent with three unmarked: %v", err)
	}
	away.Heal() // Redis answers again
	w.wait(&done)
	claims, err := mem.ClaimMarks(ctx, "", []store.Mark{
		{Kind: "digest", Key: "p", SubscriberID: 1, Shared: true},
		{Kind: "digest", Key: "p", SubscriberID: 2, Shared: true},
		{Kind: "digest", Key: "p", SubscriberID: 3, Shared: true},
	}, time.Minute)
	if err != nil || claims[0] != store.AlreadySent || claims[1] != store.AlreadySent || claims[2] != store.AlreadySent {
		t.Fatalf("marks after the wait: %v %v", claims, err)
	}
	if err := w.acquire(ctx); err != nil {
		t.Fatalf("a slot after the marks were written: %v", err)
	}
	w.release()
	// A shared mark is a SETBIT, sent in MarkSent's one pipeline.
	if n := away.Calls("setbit"); n != 1 {
		t.Fatalf("3 marks in %d round trips, want one", n)
	}
}

// TestMarkWriteFailureFreesTheWindow: a write Redis refused is logged (the
// mails are out) and gives the slots back, so sending goes on.
func TestMarkWriteFailureFreesTheWindow(t *testing.T) {
	mem, away := newAwayStore(t)
	away.Refuse(errors.New("ERR the store refused the write"))
	w := newMarkWriter(mem, 1, markLinger, redisconn.Wait{Log: discard})
	defer w.close()
	// A window never given back would block the next send for good: with
	// a deadline, that is a failure with a message, not a hung test.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var done sync.WaitGroup
	for i := int64(1); i <= 3; i++ {
		if err := w.acquire(ctx); err != nil {
			t.Fatalf("mark %d: the failed write kept the window: %v", i, err)
		}
		w.add(store.Mark{Kind: "welcome", SubscriberID: i, Shared: true}, &done)
	}
	waited := make(chan struct{})
	go func() { w.wait(&done); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		t.Fatal("a sender still waits for marks whose write failed")
	}
}

// TestMarksWrittenThroughAnOutage: marks whose write failed are written
// once Redis answers, so a retry finds the mails sent instead of sending
// them again: marks that could not be written because Redis was away (as
// during a restart), and marks whose write went out and whose answer was
// lost (a primary killed with them in flight: EOF), which may or may not
// have run and which the writer sends again, since marks are safe to
// write twice (a mark lost there would leave its mail sent and unmarked,
// and an issue one short of done for good).
func TestMarksWrittenThroughAnOutage(t *testing.T) {
	for name, c := range map[string]struct {
		failed int // the first writes that fail
		fault  func(f *redisfault.Fault, n int)
	}{
		"Redis away":      {3, func(f *redisfault.Fault, n int) { f.Flaky(n, "setbit") }},
		"the answer lost": {2, func(f *redisfault.Fault, n int) { f.FlakyWith(n, io.EOF, "setbit") }},
	} {
		t.Run(name, func(t *testing.T) {
			mem, away := newAwayStore(t)
			c.fault(away, c.failed)
			w := newMarkWriter(mem, 2, markLinger, redisconn.Wait{Log: discard})
			defer w.close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var done sync.WaitGroup
			marks := []store.Mark{{Kind: "digest", Key: "away", SubscriberID: 1, Shared: true}, {Kind: "digest", Key: "away", SubscriberID: 2, Shared: true}}
			for _, m := range marks {
				if err := w.acquire(ctx); err != nil {
					t.Fatal(err)
				}
				w.add(m, &done)
			}
			w.wait(&done)
			claims, err := mem.ClaimMarks(ctx, "", marks, time.Minute)
			if err != nil || claims[0] != store.AlreadySent || claims[1] != store.AlreadySent {
				t.Fatalf("after the outage: %v %v, want both already sent", claims, err)
			}
			if n := away.Calls("setbit"); n <= c.failed {
				t.Fatalf("%d attempts, the first %d failing: the writer gave up", n, c.failed)
			}
		})
	}
}
