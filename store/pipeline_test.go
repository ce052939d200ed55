package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// TestBatchClaimsWithColdScriptCache: concurrent pipelines right after the
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
				claims, err := s.ClaimMarks(ctx, "", marks, time.Minute)
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

// TestSubscribeManyAcrossChunks: a bulk subscribe longer than one
// pipeline chunk, with a cold script cache, answers each request in its
// own place: the one address already on the list is the only error.
func TestSubscribeManyAcrossChunks(t *testing.T) {
	c, _ := redistest.New(t, redistest.DBStore)
	s := NewRedis(c)
	ctx := context.Background()
	const n, taken = 2*pipelineChunk + 234, pipelineChunk + 17
	if _, err := s.SubscribeMany(ctx, []SubscribeRequest{{Email: fmt.Sprintf("c%05d@example.org", taken), Activate: true}}); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	reqs := make([]SubscribeRequest, n)
	for i := range reqs {
		reqs[i] = SubscribeRequest{Email: fmt.Sprintf("c%05d@example.org", i), Activate: true, OnlyNew: true}
	}
	errs, err := s.SubscribeMany(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if (err != nil) != (i == taken) {
			t.Fatalf("request %d (%s): error %v", i, reqs[i].Email, err)
		}
	}
	last, err := s.Get(ctx, reqs[n-1].Email)
	if err != nil || last.Status != Active {
		t.Fatalf("last of the bulk: %+v, %v", last, err)
	}
}

// sendTwice sends every pipeline twice, as go-redis does when the reply's
// read deadline passes: each command's answer is the second sending's.
type sendTwice struct{}

func (sendTwice) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (sendTwice) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (sendTwice) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := next(ctx, cmds); err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

// TestSubscribeManySentTwice: an import whose pipeline reaches Redis twice
// answers and counts as if it had once. Each new address is added, not
// "already present" (the second sending finds the first one's write); an
// address on the list before (by an earlier import, or by a signup at the
// import's very instant), or twice in the one call, is present; the
// day's imports count each addition once.
func TestSubscribeManySentTwice(t *testing.T) {
	c, _ := redistest.New(t, redistest.DBStore)
	// A frozen clock: a signup at the import's very instant is still not
	// the import's own write.
	at := time.Now()
	s := NewRedis(c).WithClock(func() time.Time { return at })
	ctx := context.Background()
	if _, err := s.SubscribeMany(ctx, []SubscribeRequest{{Email: "before@example.org", Activate: true, OnlyNew: true, Source: SourceImport}}); err != nil {
		t.Fatal(err)
	}
	at = at.Add(time.Millisecond)
	if _, err := s.Subscribe(ctx, SubscribeRequest{Email: "signup@example.org", Source: SourceForm}); err != nil {
		t.Fatal(err)
	}
	c.AddHook(sendTwice{})
	reqs := []SubscribeRequest{
		{Email: "a@example.org", Activate: true, OnlyNew: true, Source: SourceImport},
		{Email: "before@example.org", Activate: true, OnlyNew: true, Source: SourceImport},
		{Email: "b@example.org", Activate: true, OnlyNew: true, Source: SourceImport},
		{Email: "a@example.org", Activate: true, OnlyNew: true, Source: SourceImport},
		{Email: "signup@example.org", Activate: true, OnlyNew: true, Source: SourceImport},
	}
	errs, err := s.SubscribeMany(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, ErrExists, nil, ErrExists, ErrExists} {
		if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
			t.Fatalf("request %d (%s): %v, want %v", i, reqs[i].Email, errs[i], want)
		}
	}
	st, err := s.Stats(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Days) == 0 || st.Days[len(st.Days)-1].Imports != 3 {
		t.Fatalf("imports counted: %+v, want 3 (one before, two now)", st.Days)
	}
}
