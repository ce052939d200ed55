package accounts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHasherCap: however many hashes are asked for at once, no more than
// the slots run together; the rest wait their turn, or past the wait are
// refused with ErrHashBusy without hashing.
func TestHasherCap(t *testing.T) {
	ctx := context.Background()
	h := NewHasher(2, time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			_, err := h.Hash(ctx, "correct horse battery")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s := h.Stats(); s.Peak > 2 || s.Computed != 16 || s.InFlight != 0 {
		t.Fatalf("stats %+v: want a peak of at most 2 and 16 hashes", s)
	}

	// Every slot taken: a hash waits its wait and is refused, unhashed.
	busy := NewHasher(1, time.Millisecond)
	release, err := busy.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := busy.Verify(ctx, "$argon2id$", "pw"); !errors.Is(err, ErrHashBusy) {
		t.Fatalf("with every slot taken: %v, want ErrHashBusy", err)
	}
	if s := busy.Stats(); s.Computed != 0 {
		t.Fatalf("a refused hash was computed: %+v", s)
	}
	release()
	if err := busy.SpendTime(ctx, "pw"); err != nil {
		t.Fatalf("after the release: %v", err)
	}
	if got := strings.Split(dummyHash, "$")[3]; got != fmt.Sprintf("m=%d,t=%d,p=%d", argonMemory, argonTime, argonThreads) {
		t.Fatalf("the dummy hash's parameters %s are not a real hash's: an unknown address would cost another time", got)
	}
	if b := NewHasher(3, 0).HashMemoryBound(); b != 3*19*1024*1024 {
		t.Fatalf("memory bound %d", b)
	}
}
