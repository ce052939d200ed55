package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/newsletter/newsletter/store"
)

// Order per person: an event's turn on a channel comes when every event
// noted before it for that person and channel is done; noting again
// changes nothing; other people and other channels do not wait; an event
// older than StaleOrder holds nobody.
func testPersonOrder(t *testing.T, h Harness, s store.Store) {
	ctx := context.Background()
	now := time.Now()
	a, b, c := int64(1001), int64(1002), int64(1003)
	turn := func(channel, key string, id int64) bool {
		t.Helper()
		ok, err := s.Turn(ctx, channel, key, id)
		must(t, err)
		return ok
	}
	must(t, s.QueueInOrder(ctx, "push", "ev:1", now, []int64{a}))
	must(t, s.QueueInOrder(ctx, "push", "ev:2", now.Add(time.Second), []int64{a, b}))
	must(t, s.QueueInOrder(ctx, "push", "ev:1", now, []int64{a})) // a fan-out run again
	if turn("push", "ev:2", a) || !turn("push", "ev:1", a) {
		t.Fatal("the later event's turn came first")
	}
	if !turn("push", "ev:2", b) || !turn("sms", "ev:2", a) || !turn("push", "ev:never-noted", a) {
		t.Fatal("another person, another channel or an event never noted waited")
	}
	must(t, s.Leave(ctx, "push", "ev:1", a))
	if !turn("push", "ev:2", a) {
		t.Fatal("the later event still waits once the first is done")
	}
	must(t, s.QueueInOrder(ctx, "push", "ev:lost", now.Add(-store.StaleOrder-time.Minute), []int64{c}))
	must(t, s.QueueInOrder(ctx, "push", "ev:next", now, []int64{c}))
	if !turn("push", "ev:next", c) {
		t.Fatal("an event whose task was lost an hour ago holds the next")
	}
}
