package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/poll"
	"github.com/newsletter/newsletter/internal/redistest"
)

type impl struct {
	name string
	new  func(t *testing.T) Store
}

func impls() []impl {
	return []impl{
		{"memory", func(t *testing.T) Store { return NewMemory() }},
		{"redis", func(t *testing.T) Store { c, _ := redistest.New(t, redistest.DBStore); return NewRedis(c) }},
	}
}

// each runs fn against every implementation; sub-tests are sequential
// because the Redis one flushes a shared database.
func each(t *testing.T, fn func(t *testing.T, s Store)) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) { fn(t, im.new(t)) })
	}
}

func entry(id string) OutboxEntry {
	return OutboxEntry{ID: id, Due: time.Now().Add(-time.Minute), Body: []byte("task " + id)}
}

func TestSubscribeConfirmUnsubscribe(t *testing.T) {
	each(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		sub, err := s.Subscribe(ctx, SubscribeRequest{Email: "a@x.io", Timezone: "Europe/Berlin", Outbox: entry("confirm:a@x.io")})
		if err != nil || sub.Status != Pending || sub.ID == 0 || sub.CreatedAt.IsZero() || sub.Timezone != "Europe/Berlin" {
			t.Fatalf("subscribe: %+v %v", sub, err)
		}
		// Subscribing again while pending is allowed (the mail may be lost)
		// and keeps the id.
		again, err := s.Subscribe(ctx, SubscribeRequest{Email: "a@x.io", Outbox: entry("confirm:a@x.io")})
		if err != nil || again.ID != sub.ID {
			t.Fatalf("re-subscribe pending: %+v %v", again, err)
		}
		got, err := s.Confirm(ctx, "a@x.io", entry("welcome:a@x.io"))
		if err != nil || got.Status != Active || got.ConfirmedAt.IsZero() {
			t.Fatalf("confirm: %+v %v", got, err)
		}
		if _, err := s.Confirm(ctx, "a@x.io", entry("welcome:a@x.io")); !errors.Is(err, ErrAlreadyActive) {
			t.Fatalf("second confirm: %v", err)
		}
		if _, err := s.Subscribe(ctx, SubscribeRequest{Email: "a@x.io", Outbox: entry("confirm:a@x.io")}); !errors.Is(err, ErrAlreadyActive) {
			t.Fatalf("subscribe active: %v", err)
		}
		due, _ := s.OutboxDue(ctx, time.Now(), 10)
		if len(due) != 2 {
			t.Fatalf("outbox before unsubscribe: %d entries, want confirm and welcome", len(due))
		}
		gone, err := s.Unsubscribe(ctx, "a@x.io", "welcome:a@x.io")
		if err != nil || gone.Status != Unsubscribed || gone.UnsubscribedAt.IsZero() {
			t.Fatalf("unsubscribe: %+v %v", gone, err)
		}
		due, _ = s.OutboxDue(ctx, time.Now(), 10)
		if len(due) != 1 || due[0].ID != "confirm:a@x.io" || string(due[0].Body) != "task confirm:a@x.io" {
			t.Fatalf("unsubscribe must drop the welcome entry only: %+v", due)
		}
		if _, err := s.Confirm(ctx, "a@x.io", entry("welcome:a@x.io")); !errors.Is(err, ErrNotPending) {
			t.Fatalf("an old confirm link re-activated an unsubscribed address: %v", err)
		}
		if _, err := s.Get(ctx, "nobody@x.io"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get unknown: %v", err)
		}
		if _, err := s.Unsubscribe(ctx, "nobody@x.io"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unsubscribe unknown: %v", err)
		}
	})
}

// The subscribe answer must be what was stored, on both paths of the
// script: a new address (fields echoed) and a pending one (read back).
func TestSubscribeAnswersWhatItStored(t *testing.T) {
	each(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		for _, req := range []SubscribeRequest{
			{Email: "c@x.io", Name: "Cé", Timezone: "Asia/Tokyo", Outbox: entry("confirm:c@x.io")},
			{Email: "c@x.io", Name: "C again", Outbox: entry("confirm:c@x.io")},
			{Email: "d@x.io", Name: "D", Activate: true, Outbox: entry("welcome:d@x.io")},
			{Email: "e@x.io"},
		} {
			answered, err := s.Subscribe(ctx, req)
			if err != nil {
				t.Fatalf("%s: %v", req.Email, err)
			}
			stored, err := s.Get(ctx, req.Email)
			if err != nil || answered != stored {
				t.Fatalf("%s: answered %+v, stored %+v (%v)", req.Email, answered, stored, err)
			}
		}
	})
}

func TestActivateAtOnceAndBounce(t *testing.T) {
	each(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		sub, err := s.Subscribe(ctx, SubscribeRequest{Email: "b@x.io", Activate: true, Outbox: entry("welcome:b@x.io")})
		if err != nil || sub.Status != Active || sub.ConfirmedAt.IsZero() {
			t.Fatalf("%+v %v", sub, err)
		}
		if err := s.MarkBounced(ctx, "b@x.io"); err != nil {
			t.Fatal(err)
		}
		// Unsubscribing a bounced address must not make it look reachable.
		got, _ := s.Unsubscribe(ctx, "b@x.io")
		if got.Status != Bounced {
			t.Fatalf("bounced became %s", got.Status)
		}
	})
}

func TestOutbox(t *testing.T) {
	each(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.Now()
		for i := 0; i < 5; i++ {
			e := OutboxEntry{ID: fmt.Sprint("e", i), Due: now.Add(time.Duration(i-3) * time.Minute), Body: []byte{byte(i)}}
			if _, err := s.Subscribe(ctx, SubscribeRequest{Email: fmt.Sprintf("o%d@x.io", i), Outbox: e}); err != nil {
				t.Fatal(err)
			}
		}
		due, err := s.OutboxDue(ctx, now, 2)
		if err != nil || len(due) != 2 || due[0].ID != "e0" || due[1].ID != "e1" {
			t.Fatalf("oldest two due: %+v %v", due, err)
		}
		if err := s.OutboxDone(ctx, "e0"); err != nil {
			t.Fatal(err)
		}
		due, _ = s.OutboxDue(ctx, now, 10)
		if len(due) != 3 || due[0].ID != "e1" {
			t.Fatalf("after done: %+v", due)
		}
	})
}

func TestMarks(t *testing.T) {
	each(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		for _, shared := range []bool{false, true} {
			m := Mark{Kind: fmt.Sprint("digest", shared), Key: "2026-W49", SubscriberID: 12345, Shared: shared}
			if c, err := s.ClaimMark(ctx, m, time.Minute); err != nil || c != Claimed {
				t.Fatalf("first claim: %v %v", c, err)
			}
			if c, _ := s.ClaimMark(ctx, m, time.Minute); c != Busy {
				t.Fatalf("second claim while held: %v, want Busy", c)
			}
			if err := s.ReleaseMark(ctx, m); err != nil {
				t.Fatal(err)
			}
			if c, _ := s.ClaimMark(ctx, m, time.Minute); c != Claimed {
				t.Fatalf("claim after release: %v", c)
			}
			if err := s.MarkSent(ctx, m); err != nil {
				t.Fatal(err)
			}
			if c, _ := s.ClaimMark(ctx, m, time.Minute); c != AlreadySent {
				t.Fatalf("claim after sent: %v, want AlreadySent", c)
			}
			other := m
			other.SubscriberID++
			if c, _ := s.ClaimMark(ctx, other, time.Minute); c != Claimed {
				t.Fatalf("neighbour's claim: %v", c)
			}
		}
	})
}

func TestClaimExpires(t *testing.T) {
	each(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.Now()
		if m, ok := s.(*Memory); ok {
			m.SetClock(func() time.Time { return now })
		}
		m := Mark{Kind: "welcome", SubscriberID: 7, Shared: true}
		if c, _ := s.ClaimMark(ctx, m, 50*time.Millisecond); c != Claimed {
			t.Fatal("claim")
		}
		if mem, ok := s.(*Memory); ok {
			mem.SetClock(func() time.Time { return now.Add(time.Second) })
		}
		// A worker that died holding the claim must not block the mail for
		// ever: once the claim expires a retry may send.
		poll.Until(t, 5*time.Second, func() error {
			c, err := s.ClaimMark(ctx, m, time.Minute)
			if err == nil && c != Claimed {
				err = fmt.Errorf("the dead worker's claim still holds: %v", c)
			}
			return err
		})
	})
}

// TestConcurrentSubscribeUnsubscribe races both operations on one address:
// whatever the order, the end state is one of the two that were asked for,
// and the active set agrees with the subscriber's status.
func TestConcurrentSubscribeUnsubscribe(t *testing.T) {
	each(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		for round := 0; round < 20; round++ {
			email := "race" + strconv.Itoa(round) + "@x.io"
			var wg sync.WaitGroup
			for i := 0; i < 8; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					if i%2 == 0 {
						s.Subscribe(ctx, SubscribeRequest{Email: email, Activate: true, Outbox: entry("welcome:" + email)})
					} else {
						s.Unsubscribe(ctx, email, "welcome:"+email)
					}
				}(i)
			}
			wg.Wait()
			sub, err := s.Get(ctx, email)
			if err != nil {
				t.Fatal(err)
			}
			if sub.Status != Active && sub.Status != Unsubscribed {
				t.Fatalf("state %q was never asked for", sub.Status)
			}
			if r, ok := s.(*Redis); ok {
				_, err := r.rdb.ZScore(ctx, keyActive, strconv.FormatInt(sub.ID, 10)).Result()
				if inSet := err == nil; inSet != (sub.Status == Active) {
					t.Fatalf("status %s but in active set = %v", sub.Status, inSet)
				}
			}
		}
	})
}
