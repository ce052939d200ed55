package redisfault_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redisfault"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
)

var incr = redis.NewScript(`return redis.call('INCR', KEYS[1])`)

// TestDownAndHeal: a command the fault names fails as an unreachable Redis
// does, others go through; every script is covered, whether go-redis sends
// it as EVALSHA or EVAL; Heal ends it.
func TestDownAndHeal(t *testing.T) {
	c, _ := redistest.New(t, redistest.DBRedisFault)
	f := redisfault.Add(c)
	ctx := context.Background()

	f.Down("get")
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redisfault.ErrUnreachable) || !store.Unavailable(err) {
		t.Fatalf("GET while down: %v, want Redis unreachable", err)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET, not named: %v", err)
	}

	f.Down("evalsha")
	if err := incr.Run(ctx, c, []string{"n"}).Err(); !store.Unavailable(err) {
		t.Fatalf("a script (EVALSHA) while scripts are down: %v", err)
	}
	if err := incr.Eval(ctx, c, []string{"n"}).Err(); !store.Unavailable(err) {
		t.Fatalf("a script (EVAL) while scripts are down: %v", err)
	}

	f.Down()
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "a", "1", 0)
		p.Set(ctx, "b", "1", 0)
		return nil
	})
	if !store.Unavailable(err) {
		t.Fatalf("a pipeline while everything is down: %v", err)
	}
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error { p.Set(ctx, "a", "1", 0); return nil }); !store.Unavailable(err) {
		t.Fatalf("a transaction while everything is down: %v", err)
	}
	f.Heal()
	if n, err := c.Exists(ctx, "a", "b").Result(); err != nil || n != 0 {
		t.Fatalf("after Heal: %d keys written while down, %v", n, err)
	}
	if v, err := incr.Run(ctx, c, []string{"n"}).Int(); err != nil || v != 1 {
		t.Fatalf("a script after Heal: %d %v, want 1 (none ran while down)", v, err)
	}
	if got := f.Calls("get"); got != 1 {
		t.Fatalf("GET sent %d times, want 1", got)
	}
}

// TestFlaky: each command, each script on its own, fails its first n calls.
func TestFlaky(t *testing.T) {
	c, _ := redistest.New(t, redistest.DBRedisFault)
	f := redisfault.Add(c)
	ctx := context.Background()
	other := redis.NewScript(`return redis.call('INCRBY', KEYS[1], 10)`)

	f.Flaky(2)
	for i := range 2 {
		if err := incr.Run(ctx, c, []string{"n"}).Err(); !store.Unavailable(err) {
			t.Fatalf("call %d of a flaky script: %v", i+1, err)
		}
	}
	if v, err := incr.Run(ctx, c, []string{"n"}).Int(); err != nil || v != 1 {
		t.Fatalf("third call: %d %v", v, err)
	}
	if err := other.Run(ctx, c, []string{"n"}).Err(); !store.Unavailable(err) {
		t.Fatalf("another script's first call: %v, want its own outage", err)
	}
	var met int
	for _, s := range f.Seen() {
		if slices.Contains(s.Names, "evalsha") {
			met += s.Met
		}
	}
	if met != 3 {
		t.Fatalf("the scripts met the outage %d times, want 3 (%v)", met, f.Seen())
	}
}

// TestHang: a hung command waits until Heal, then is sent; or until its
// context ends, then answers the context's error.
func TestHang(t *testing.T) {
	c, _ := redistest.New(t, redistest.DBRedisFault)
	f := redisfault.Add(c)
	ctx := context.Background()

	f.Hang("set")
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := c.Set(short, "k", "1", 0).Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a hung SET past its deadline: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Set(ctx, "k", "2", 0).Err() }()
	// Wait until the SET is held, then release it.
	poll.True(t, 10*time.Second, "the second SET held", func() bool { return f.Calls("set") == 2 })
	select {
	case err := <-done:
		t.Fatalf("a hung SET answered before Heal: %v", err)
	default:
	}
	f.Heal()
	if err := <-done; err != nil {
		t.Fatalf("the released SET: %v", err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "2" {
		t.Fatalf("k = %q %v, want the released write's 2", v, err)
	}
}

// TestRefuse: a refusal is an answer, not an outage.
func TestRefuse(t *testing.T) {
	c, _ := redistest.New(t, redistest.DBRedisFault)
	f := redisfault.Add(c)
	refused := errors.New("ERR refused")
	f.Refuse(refused)
	if err := c.Ping(context.Background()).Err(); !errors.Is(err, refused) || store.Unavailable(err) {
		t.Fatalf("a refused PING: %v", err)
	}
}
