package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
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
