package accounts

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"
)

// ErrHashBusy is a password hash that found every slot taken for longer
// than the Hasher waits: answer 503 with Retry-After (HashRetryAfter),
// having changed nothing.
var ErrHashBusy = errors.New("too many password checks at once: try again in a moment")

// HashRetryAfter is the Retry-After of an ErrHashBusy answer: by then a
// queue that was full has been served a few times over.
const HashRetryAfter = 2 * time.Second

// HashWait is how long a hash waits for a slot before ErrHashBusy: a
// person signing in during a burst still gets in, a flood gets 503s fast.
const HashWait = time.Second

// A Hasher runs the argon2id hashes (argonMemory, 19 MiB each) at most
// Slots at a time. Without it every request that carries a password
// allocates its own 19 MiB at once, so memory grows with the requests in
// flight (100 logins at once took the service to 1.9 GB): with it, the
// hashes' memory is at most Slots × 19 MiB whatever arrives, and the
// rest wait up to Wait and then are refused. Every path that hashes a
// password goes through Passwords, the process's one Hasher.
type Hasher struct {
	slots chan struct{}
	wait  time.Duration
	// inFlight, peak and computed are for the tests and the benchmark:
	// hashes running now, the most ever running together, hashes done.
	inFlight, peak, computed atomic.Int64
}

// NewHasher runs at most slots hashes at once (at least one); a hash
// waits up to wait for a slot.
func NewHasher(slots int, wait time.Duration) *Hasher {
	return &Hasher{slots: make(chan struct{}, max(slots, 1)), wait: wait}
}

// Passwords is the process's Hasher: one slot per core (argon2id with
// one lane keeps a core busy, so more slots only add memory, not speed).
var Passwords = NewHasher(runtime.GOMAXPROCS(0), HashWait)

// HashMemoryBound is the most memory the hashes of h can hold at once.
func (h *Hasher) HashMemoryBound() int64 { return int64(cap(h.slots)) * argonMemory * 1024 }

// Slots is how many hashes h runs at once.
func (h *Hasher) Slots() int { return cap(h.slots) }

// Acquire takes a slot, waiting up to h's wait (or until ctx ends): the
// release to call when done, or ErrHashBusy (ctx's error when it ended).
// Hash, Verify and SpendTime take theirs with it.
func (h *Hasher) Acquire(ctx context.Context) (release func(), err error) {
	select {
	case h.slots <- struct{}{}:
	default:
		t := time.NewTimer(h.wait)
		defer t.Stop()
		select {
		case h.slots <- struct{}{}:
		case <-t.C:
			return nil, ErrHashBusy
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	n := h.inFlight.Add(1)
	for p := h.peak.Load(); n > p && !h.peak.CompareAndSwap(p, n); p = h.peak.Load() {
	}
	return func() {
		h.inFlight.Add(-1)
		<-h.slots
	}, nil
}

// run runs one hash in a slot.
func (h *Hasher) run(ctx context.Context, hash func()) error {
	release, err := h.Acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	h.computed.Add(1)
	hash()
	return nil
}

// Hash is pw's argon2id hash (hashPassword), in a slot.
func (h *Hasher) Hash(ctx context.Context, pw string) (string, error) {
	var out string
	err := h.run(ctx, func() { out = hashPassword(pw) })
	return out, err
}

// Verify reports whether pw is the password encoded hashes (verifyPassword),
// in a slot.
func (h *Hasher) Verify(ctx context.Context, encoded, pw string) (bool, error) {
	var ok bool
	err := h.run(ctx, func() { ok = verifyPassword(encoded, pw) })
	return ok, err
}

// SpendTime verifies pw against a hash nobody has, in a slot: what a
// password check costs, for an address without an account, so the
// answer's time and the slots it takes do not tell which addresses have
// accounts.
func (h *Hasher) SpendTime(ctx context.Context, pw string) error {
	return h.run(ctx, func() { verifyPassword(dummyHash, pw) })
}

// HashStats are a Hasher's counts.
type HashStats struct {
	Slots    int
	InFlight int64 // hashes running now
	Peak     int64 // the most that ever ran together
	Computed int64 // hashes run
}

// Stats are h's counts now.
func (h *Hasher) Stats() HashStats {
	return HashStats{Slots: cap(h.slots), InFlight: h.inFlight.Load(), Peak: h.peak.Load(), Computed: h.computed.Load()}
}
