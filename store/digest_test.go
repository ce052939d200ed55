package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/redistest"
)

func TestDigestRunOnceWithItsItems(t *testing.T) {
	each(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		if _, err := s.DigestRun(ctx, "2026-W49"); !errors.Is(err, ErrNoRun) {
			t.Fatalf("unknown run: %v", err)
		}
		s.AddItem(ctx, Item{Title: "One", URL: "https://x/1"})
		s.AddItem(ctx, Item{Title: "Two", URL: "https://x/2", Summary: "second"})
		for i := 0; i < 3; i++ {
			s.Subscribe(ctx, SubscribeRequest{Email: fmt.Sprintf("a%d@x.io", i), Activate: true})
		}
		s.Subscribe(ctx, SubscribeRequest{Email: "pending@x.io"})
		run, created, err := s.StartDigestRun(ctx, "2026-W49")
		if err != nil || !created || run.State != RunPlanning || len(run.Items) != 2 || run.Audience != 3 {
			t.Fatalf("start: %+v created=%v %v", run, created, err)
		}
		if run.Items[1].Summary != "second" || run.Items[0].PublishedAt.IsZero() {
			t.Fatalf("items: %+v", run.Items)
		}
		// A second start (another replica, a retry) changes nothing.
		s.AddItem(ctx, Item{Title: "Three", URL: "https://x/3"})
		again, created, _ := s.StartDigestRun(ctx, "2026-W49")
		if created || len(again.Items) != 2 {
			t.Fatalf("second start: created=%v items=%d", created, len(again.Items))
		}
		// The next period takes only what was published since.
		next, _, _ := s.StartDigestRun(ctx, "2026-W50")
		if p, err := s.LatestDigestPeriod(ctx); err != nil || p != "2026-W50" {
			t.Fatalf("latest period %q %v", p, err)
		}
		if len(next.Items) != 1 || next.Items[0].Title != "Three" {
			t.Fatalf("next period items: %+v", next.Items)
		}
		empty, _, _ := s.StartDigestRun(ctx, "2026-W51")
		if empty.State != RunEmpty {
			t.Fatalf("a period with nothing new: %s", empty.State)
		}
	})
}

func TestKeysetWalkAndOutcomes(t *testing.T) {
	each(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		for i := 0; i < 25; i++ {
			s.Subscribe(ctx, SubscribeRequest{Email: fmt.Sprintf("k%02d@x.io", i), Activate: true})
		}
		s.Unsubscribe(ctx, "k03@x.io")
		s.MarkBounced(ctx, "k04@x.io")
		var all []int64
		cursor := int64(0)
		for {
			page, err := s.ActiveAfter(ctx, cursor, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			all = append(all, page...)
			cursor = page[len(page)-1]
		}
		if len(all) != 23 {
			t.Fatalf("walked %d active subscribers, want 23", len(all))
		}
		for i := 1; i < len(all); i++ {
			if all[i] <= all[i-1] {
				t.Fatal("pages are not in id order")
			}
		}
		subs, _ := s.SubscribersByID(ctx, []int64{all[0], 999999})
		if subs[0].Email != "k00@x.io" || subs[1].ID != 0 {
			t.Fatalf("by id: %+v", subs)
		}
		s.AddItem(ctx, Item{Title: "x", URL: "https://x"})
		s.StartDigestRun(ctx, "p")
		s.SetOutcome(ctx, "p", OutcomeSkipped, 1, 2)
		s.SetOutcome(ctx, "p", OutcomeSkipped, 2) // again: counted once
		s.SetOutcome(ctx, "p", OutcomeFailed, 3)
		s.MarkSent(ctx, Mark{Kind: "digest", Key: "p", SubscriberID: 5, Shared: true})
		s.AdvanceDigestRun(ctx, "p", 10, 10, false)
		s.AdvanceDigestRun(ctx, "p", 25, 13, true)
		run, _ := s.DigestRun(ctx, "p")
		if run.Skipped != 2 || run.Failed != 1 || run.Sent != 1 || run.Planned != 23 || run.Cursor != 25 || run.State != RunPlanned || run.PlannedAt.IsZero() {
			t.Fatalf("counters: %+v", run)
		}
		marks := []Mark{{Kind: "digest", Key: "p", SubscriberID: 5, Shared: true}, {Kind: "digest", Key: "p", SubscriberID: 6, Shared: true}}
		claims, err := s.ClaimMarks(ctx, marks, time.Minute)
		if err != nil || claims[0] != AlreadySent || claims[1] != Claimed {
			t.Fatalf("claims %v %v", claims, err)
		}
		s.ReleaseMarks(ctx, marks[1:])
		if c, _ := s.ClaimMark(ctx, marks[1], time.Minute); c != Claimed {
			t.Fatal("release did not free the claim")
		}
	})
}

func TestImportNeverResubscribes(t *testing.T) {
	each(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		s.Subscribe(ctx, SubscribeRequest{Email: "left@x.io", Activate: true})
		s.Unsubscribe(ctx, "left@x.io")
		if _, err := s.Subscribe(ctx, SubscribeRequest{Email: "left@x.io", Activate: true, OnlyNew: true}); !errors.Is(err, ErrExists) {
			t.Fatalf("import of a known address: %v", err)
		}
		if sub, _ := s.Get(ctx, "left@x.io"); sub.Status != Unsubscribed {
			t.Fatalf("import re-subscribed someone who left: %s", sub.Status)
		}
		if sub, err := s.Subscribe(ctx, SubscribeRequest{Email: "new@x.io", Activate: true, OnlyNew: true}); err != nil || sub.Status != Active {
			t.Fatalf("new address: %+v %v", sub, err)
		}
		if due, _ := s.OutboxDue(ctx, time.Now().Add(time.Hour), 10); len(due) != 0 {
			t.Fatalf("an empty outbox entry was written: %+v", due)
		}
	})
}

// TestBatchClaimsWithColdScriptCache: concurrent pipelines right after the
// server lost its scripts (a restart) must each get every claim they asked
// for, never report their own claim as held by another run.
func TestBatchClaimsWithColdScriptCache(t *testing.T) {
	c, _ := redistest.New(t, redistest.DBStore)
	s := NewRedis(c)
	ctx := context.Background()
	for round := 0; round < 20; round++ {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				marks := make([]Mark, 50)
				for i := range marks {
					marks[i] = Mark{Kind: "digest", Key: fmt.Sprint("cold", round), SubscriberID: int64(g*100 + i), Shared: true}
				}
				claims, err := s.ClaimMarks(ctx, marks, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				for i, cl := range claims {
					if cl != Claimed {
						errs <- fmt.Errorf("round %d: mark %d came back %v", round, marks[i].SubscriberID, cl)
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}
