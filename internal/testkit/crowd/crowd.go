// Package crowd is the bookkeeping the fake push services (fcmtest,
// apnstest) share for a client's concurrency: the requests in flight and
// the most at once, holding them until a crowd has come (HoldUntil,
// Release), and the connections clients opened. MaxStreams is the test
// of a client's bound on its streams that they share.
package crowd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// Crowd counts a server's requests in flight and its connections. The
// zero value is ready; its methods are safe for concurrent use.
type Crowd struct {
	conns atomic.Int32

	mu          sync.Mutex
	inFlight    int
	maxInFlight int
	holdUntil   int
	released    chan struct{}
}

// CountConnections makes c count the connections srv takes (through its
// ConnState, which it sets): call it before srv starts.
func (c *Crowd) CountConnections(srv *http.Server) {
	srv.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			c.conns.Add(1)
		}
	}
}

// Connections counts the connections clients opened.
func (c *Crowd) Connections() int { return int(c.conns.Load()) }

// MaxInFlight is the most requests in flight at once.
func (c *Crowd) MaxInFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxInFlight
}

// HoldUntil makes requests wait, unanswered, until n of them are in
// flight at once: a client that does not send them concurrently never
// gets an answer.
func (c *Crowd) HoldUntil(n int) {
	c.mu.Lock()
	c.holdUntil, c.released = n, make(chan struct{})
	c.mu.Unlock()
}

// Release answers the requests HoldUntil holds, and holds no more.
func (c *Crowd) Release() {
	c.mu.Lock()
	c.release()
	c.mu.Unlock()
}

// release is Release with c.mu held.
func (c *Crowd) release() {
	if c.released != nil {
		close(c.released)
		c.released, c.holdUntil = nil, 0
	}
}

// Hold counts r in flight and waits for HoldUntil's crowd, if one was
// asked for (or for r's context to end); done counts it out.
func (c *Crowd) Hold(r *http.Request) (done func()) {
	c.mu.Lock()
	c.inFlight++
	c.maxInFlight = max(c.maxInFlight, c.inFlight)
	released := c.released
	if released != nil && c.inFlight >= c.holdUntil {
		c.release()
	}
	c.mu.Unlock()
	if released != nil {
		select {
		case <-released:
		case <-r.Context().Done():
		}
	}
	return func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}
}

// Server is a fake service that counts its crowd (fcmtest.Server,
// apnstest.Server).
type Server interface {
	HoldUntil(n int)
	Release()
	MaxInFlight() int
	Connections() int
}

// Streams is what MaxStreams expects of a client.
type Streams struct {
	// Max is the client's MaxStreams; Waiting is how many sends the
	// senders make past it, which wait for a stream.
	Max, Waiting int
	// Noun names what is in flight in the messages ("messages",
	// "requests").
	Noun string
}

// MaxStreams tests that a client's MaxStreams bounds its requests in
// flight, every sender's together, on one connection: with srv holding
// every request, it runs senders send(0) … send(senders-1) at once and
// waits until want.Max are at the server and want.Waiting wait for a
// stream (waiting, the client's count), then releases them. A sender's
// error fails the test.
func MaxStreams(t *testing.T, srv Server, waiting func() int, want Streams, senders int, send func(i int) error) {
	t.Helper()
	srv.HoldUntil(100) // never: held until Release
	var wg sync.WaitGroup
	errs := make([]error, senders)
	for i := range errs {
		wg.Go(func() { errs[i] = send(i) })
	}
	poll.Until(t, poll.BusyMachine, func() error {
		if srv.MaxInFlight() < want.Max || waiting() != want.Waiting {
			return fmt.Errorf("%d %s in flight at most, %d waiting for a stream, want %d and %d",
				srv.MaxInFlight(), want.Noun, waiting(), want.Max, want.Waiting)
		}
		return nil
	})
	if most := srv.MaxInFlight(); most != want.Max {
		t.Errorf("%d %s in flight at most, want MaxStreams, %d", most, want.Noun, want.Max)
	}
	srv.Release()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if most := srv.MaxInFlight(); most > want.Max {
		t.Errorf("%d %s in flight at most, want no more than MaxStreams, %d", most, want.Noun, want.Max)
	}
	if conns := srv.Connections(); conns != 1 {
		t.Errorf("%d connections, want 1", conns)
	}
}

// Waiter is what WaitForAStream drives: a client of one stream that has
// made Before requests so far (Requests counts them at the server).
type Waiter struct {
	Server
	// Send sends the i-th message (1, the one held; 2, the one that
	// waits for a stream) titled title through the client.
	Send func(ctx context.Context, i int, title string) error
	// Waiting counts the client's sends waiting for a stream.
	Waiting func() int
	// Requests counts the requests at the server, Before of them before
	// the test.
	Requests func() int
	Before   int
	// Retry says why err (the canceled send's) is not a Retry of
	// context.Canceled, or nil when it is.
	Retry func(err error) error
	// Noun names a request in the messages ("message", "request").
	Noun string
}

// WaitForAStream tests that a send waiting for one of the client's
// streams gives up when its context ends, without a request, and that is
// worth a retry; the stream's holder is answered once released.
func WaitForAStream(t *testing.T, w Waiter) {
	t.Helper()
	w.HoldUntil(2) // never: the one stream is held
	held := make(chan error, 1)
	go func() { held <- w.Send(context.Background(), 1, "held") }()
	poll.True(t, poll.BusyMachine, "the held "+w.Noun+" at the server", func() bool { return w.Requests() == w.Before+1 })
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { waited <- w.Send(ctx, 2, "waits") }()
	poll.True(t, poll.BusyMachine, "the next send waiting for the stream", func() bool { return w.Waiting() == 1 })
	cancel()
	if err := w.Retry(<-waited); err != nil || w.Requests() != w.Before+1 {
		t.Fatalf("waiting for a stream, canceled: %v, %d %ss, want Retry and no %s", err, w.Requests(), w.Noun, w.Noun)
	}
	w.Release()
	if err := <-held; err != nil {
		t.Fatalf("the held %s: %v", w.Noun, err)
	}
}
