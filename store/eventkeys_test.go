package store

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestEventKeyLifecycle: a key is reserved once (its owner's call sent
// again finds it its own), held off from others while its lease runs,
// taken over under the same event id once it ran out or was let go,
// answered once finished, bound to its body and to its scope, and gone
// after EventKeyTTL: then the key makes a new event. miniredis, for its
// FastForward: the TTL is Redis's clock, the lease the store's.
func TestEventKeyLifecycle(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	t0 := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *Redis { return NewRedis(rdb).WithClock(func() time.Time { return t0.Add(d) }) }
	a := EventKey{Scope: "admin-token", Key: "k", Sum: "s1", Owner: "A", EventID: "ev_a"}
	reserve := func(s *Redis, k EventKey, want EventKeyOutcome, id string) EventKeyState {
		t.Helper()
		got, err := s.ReserveEventKey(ctx, k)
		if err != nil || got.Outcome != want || got.EventID != id {
			t.Fatalf("reserve %+v: %+v %v, want outcome %d id %q", k, got, err, want, id)
		}
		return got
	}
	reserve(at(0), a, KeyReserved, "ev_a")
	reserve(at(0), a, KeyReserved, "ev_a") // the same call resent
	b := a
	b.Owner, b.EventID = "B", "ev_b"
	reserve(at(EventKeyLease-time.Millisecond), b, KeyBusy, "")
	other := b
	other.Sum = "s2"
	reserve(at(0), other, KeyOtherRequest, "")
	elsewhere := b
	elsewhere.Scope = "product-b"
	reserve(at(0), elsewhere, KeyReserved, "ev_b")

	// A's lease runs out: B takes over A's event id; A no longer holds it.
	reserve(at(EventKeyLease), b, KeyReserved, "ev_a")
	if mine, err := at(0).FinishEventKey(ctx, a, 202, []byte(`{"id":"ev_a"}`)); err != nil || mine {
		t.Fatalf("the lapsed holder finished: %v %v", mine, err)
	}
	// B fails and lets it go: the next owner goes ahead at once.
	if err := at(0).ReleaseEventKey(ctx, b); err != nil {
		t.Fatal(err)
	}
	c := b
	c.Owner, c.EventID = "C", "ev_c"
	reserve(at(EventKeyLease), c, KeyReserved, "ev_a")
	if mine, err := at(0).FinishEventKey(ctx, c, 202, []byte(`{"id":"ev_a"}`)); err != nil || !mine {
		t.Fatalf("finish: %v %v", mine, err)
	}
	if err := at(0).ReleaseEventKey(ctx, c); err != nil { // after the answer: nothing to let go
		t.Fatal(err)
	}
	got := reserve(at(time.Hour), a, KeyAnswered, "")
	if got.Code != 202 || string(got.Answer) != `{"id":"ev_a"}` {
		t.Fatalf("the answer: %d %s", got.Code, got.Answer)
	}
	reserve(at(time.Hour), other, KeyOtherRequest, "")

	key := eventKeyKey(a.Scope, a.Key)
	if ttl := mr.TTL(key); ttl != EventKeyTTL {
		t.Fatalf("the answered key is kept %s, want %s", ttl, EventKeyTTL)
	}
	mr.FastForward(EventKeyTTL - time.Second)
	reserve(at(EventKeyTTL), a, KeyAnswered, "")
	mr.FastForward(time.Second)
	if mr.Exists(key) {
		t.Fatalf("%s outlived its %s", key, EventKeyTTL)
	}
	d := a
	d.Owner, d.EventID = "D", "ev_d"
	reserve(at(EventKeyTTL), d, KeyReserved, "ev_d")
}
