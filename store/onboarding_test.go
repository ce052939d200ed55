package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// The onboarding index holds who had the sequence's first step scheduled:
// a confirmation, or an activation with its outbox entry; not an import.
func TestOnboardingIndex(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Millisecond)
	at := func(d time.Duration) *Redis { return NewRedis(rdb).WithClock(func() time.Time { return t0.Add(d) }) }
	first := outbox.Entry{ID: "welcome:x", Due: t0, Body: []byte("w")}
	old, err := at(-48*time.Hour).Subscribe(ctx, SubscribeRequest{Email: "old@x.io", Activate: true, Outbox: first})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := at(0).Subscribe(ctx, SubscribeRequest{Email: "imported@x.io", Activate: true, OnlyNew: true}); err != nil {
		t.Fatal(err)
	}
	pending, err := at(-time.Hour).Subscribe(ctx, SubscribeRequest{Email: "p@x.io"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := at(0).Confirm(ctx, "p@x.io", first); err != nil {
		t.Fatal(err)
	}
	s := NewRedis(rdb)
	ids, err := s.Onboarding(ctx, t0.Add(-72*time.Hour), 0, 10)
	if err != nil || !slices.Equal(ids, []int64{old.ID, pending.ID}) {
		t.Fatalf("index %v %v, want [%d %d] in confirmation order", ids, err, old.ID, pending.ID)
	}
	if ids, _ := s.Onboarding(ctx, t0.Add(-72*time.Hour), 1, 10); !slices.Equal(ids, []int64{pending.ID}) {
		t.Fatalf("second page %v", ids)
	}
	if err := s.TrimOnboarding(ctx, t0.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ids, _ := s.Onboarding(ctx, time.Time{}, 0, 10); !slices.Equal(ids, []int64{pending.ID}) {
		t.Fatalf("after trimming %v", ids)
	}
	if v, err := s.SequenceVersion(ctx); v != "" || err != nil {
		t.Fatalf("version before any: %q %v", v, err)
	}
	if err := s.SetSequenceVersion(ctx, "abc"); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.SequenceVersion(ctx); v != "abc" {
		t.Fatalf("version %q", v)
	}
}
