package store

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// outboxArgs counts the ids handed to outboxDoneScript, summed over the
// outboxes each was sent to.
type outboxArgs struct{ ids atomic.Int64 }

func (h *outboxArgs) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		a := c.Args()
		if c.Err() != nil { // NOSCRIPT: sent again as EVAL
			continue
		}
		if len(a) < 5 || !strings.HasPrefix(strings.ToLower(fmt.Sprint(a[0])), "eval") {
			continue
		}
		if k, _ := a[3].(string); strings.HasSuffix(k, ":outbox") {
			h.ids.Add(int64(len(a) - 5))
		}
	}
}

func (h *outboxArgs) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *outboxArgs) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		err := next(ctx, c)
		// go-redis may set a command's error only after its hooks
		// return: an EVALSHA answered NOSCRIPT (then sent again as
		// EVAL) shows it in err alone, and ran nothing.
		if err == nil {
			h.count(c)
		}
		return err
	}
}
func (h *outboxArgs) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cs []redis.Cmder) error {
		err := next(ctx, cs)
		h.count(cs...)
		return err
	}
}

// OutboxDone drops each entry from its own outbox: signing up 20 people
// and clearing their confirmations sends each id to one outbox (it sent
// each to all 65), and an entry written where the guess does not look (a
// person from before the shards) is still found and cleared.
func TestOutboxDoneAsksOneOutboxPerEntry(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	s := NewRedis(rdb)
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 20 {
		email := fmt.Sprintf("reader%d@example.org", i)
		id := "confirm:" + email
		ids = append(ids, id)
		if _, err := s.Subscribe(ctx, SubscribeRequest{Email: email, Source: SourceForm,
			Outbox: outbox.Entry{ID: id, Due: time.Now().Add(-time.Hour), Body: []byte("x")}}); err != nil {
			t.Fatal(err)
		}
	}
	// An entry in a shard that is not its address's home, as a layout-3
	// person's is.
	const stray = "welcome:old.timer@example.org"
	away := (homeShard("old.timer@example.org") + 1) % Shards
	if err := rdb.HSet(ctx, away.key(sfxOutbox), stray, "x").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, away.key(sfxDue), redis.Z{Score: 1, Member: stray}).Err(); err != nil {
		t.Fatal(err)
	}
	before, err := s.OutboxDue(ctx, time.Now(), 100)
	if err != nil || len(before) != 21 {
		t.Fatalf("outbox before: %d entries, %v; want 21", len(before), err)
	}

	h := &outboxArgs{}
	rdb.AddHook(h)
	if err := s.OutboxDone(ctx, ids...); err != nil {
		t.Fatal(err)
	}
	if got := h.ids.Load(); got != int64(len(ids)) {
		t.Fatalf("OutboxDone sent %d ids to the outboxes' script for %d entries: each entry should go to its own outbox only", got, len(ids))
	}
	if err := s.OutboxDone(ctx, stray); err != nil {
		t.Fatal(err)
	}
	left, err := s.OutboxDue(ctx, time.Now(), 100)
	if err != nil || len(left) != 0 {
		t.Fatalf("outbox after: %v, %v; want empty", left, err)
	}
}
