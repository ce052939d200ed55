package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/redistest"
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
