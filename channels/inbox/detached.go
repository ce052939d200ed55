package inbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/newsletter/newsletter/channels"
)

// A stream over HTTP/1.1 is detached from net/http: its connection is
// hijacked and the handler returns, so an idle stream holds no goroutine
// (net/http's two a connection, with their stacks), nor the connection's
// read and write buffers (4 KB each) and the request: what is left is the
// connection, this struct and its two timers. bench-inbox measured 29 KB
// of the server's memory a stream before (10,000 streams open), and what
// net/http itself holds for a connection in its handler is over 20 KB.
// A goroutine runs only while the stream has something to do: a notice
// (the hub's wake), its heartbeat, its end. HTTP/2, or a writer that
// cannot be hijacked, keeps the handler's loop (stream).
//
// Without a read always pending on the connection, a client that went
// away is found at the next heartbeat (a poll of the connection, then
// the write), not at once: its slot is held at most that long.

// What a detached stream is asked to do (detached.pending).
const (
	doRead = 1 << iota // read the log: the hub's wake
	doBeat             // the heartbeat
	doEnd              // end: its life is over, or the process ends its streams
)

// detached is one stream without a goroutine while idle.
type detached struct {
	c    *Channel
	p    channels.Person
	l    *listener
	conn net.Conn
	s    *sse
	last string // the log id sent up to; only the running goroutine touches it

	life, beat *time.Timer

	mu      sync.Mutex
	pending int
	running bool
	ended   bool
}

// hijack takes the connection of an HTTP/1.x stream from net/http and
// writes the response's head with header h (the stream's and the CORS
// headers), the body to run until the connection closes. It answers nil
// when the writer cannot be hijacked (the stream keeps the handler).
func hijack(rc *http.ResponseController, h http.Header) net.Conn {
	conn, _, err := rc.Hijack() // net/http's buffered reader and writer are not used
	if err != nil {
		return nil
	}
	var b strings.Builder
	b.WriteString("HTTP/1.1 200 OK\r\n")
	h.Set("Connection", "close") // the body ends when the connection does
	if err := h.Write(&b); err != nil {
		_ = conn.Close() // a header that cannot be written: nothing was sent
		return conn
	}
	fmt.Fprintf(&b, "\r\nretry: %d\n\n", retryMS)
	if err := conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err == nil {
		_, err = conn.Write([]byte(b.String()))
		if err == nil {
			return conn
		}
	}
	_ = conn.Close() // the client is gone; the stream ends at its first step
	return conn
}

// detach runs the stream of p on conn from log id last ("" for a fresh
// stream), its goroutines started by l's notices and its timers.
func (c *Channel) detach(conn net.Conn, p channels.Person, l *listener, last string) {
	d := &detached{c: c, p: p, l: l, conn: conn, last: last}
	d.s = &sse{w: conn, deadline: conn.SetWriteDeadline}
	// The first step, before anything can kick: the count (a fresh
	// stream) or what came after last. A notice before attach is not
	// lost: the first read comes after it.
	d.pending, d.running = doRead, true
	d.life = time.AfterFunc(streamLife, func() { d.kick(doEnd) })
	d.beat = time.AfterFunc(c.heartbeat, func() { d.kick(doBeat) })
	c.hub.attach(l, d.kick, func() bool { return peerGone(conn) })
	go d.run()
}

// kick asks the stream to do what (doRead, doBeat, doEnd), starting its
// goroutine unless it is running: what it is asked meanwhile, it does
// before it stops. It may be called under the hub's lock.
func (d *detached) kick(what int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ended {
		return
	}
	d.pending |= what
	if !d.running {
		d.running = true
		go d.run()
	}
}

// run does what the stream was asked until nothing is left.
func (d *detached) run() {
	for {
		d.mu.Lock()
		what := d.pending
		d.pending = 0
		if what == 0 {
			d.running = false
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
		if what&doEnd != 0 || !d.step(what) {
			d.end()
			return
		}
	}
}

// step reads the log and sends what is new, after the heartbeat if it is
// due; it answers false when the stream is over (the client gone).
func (d *detached) step(what int) bool {
	ctx := context.Background()
	if what&doBeat != 0 {
		if peerGone(d.conn) {
			return false
		}
		if d.s.printf(": ping\n\n"); d.s.err != nil {
			return false
		}
		d.beat.Reset(d.c.heartbeat)
	}
	if d.last == "" {
		last, err := d.c.start(ctx, d.p, d.s)
		if err != nil {
			return false
		}
		d.last = last
	}
	last, err := d.c.sendSince(ctx, d.p, d.s, d.last)
	d.last = last
	return err == nil && d.s.err == nil
}

// end closes the stream: its connection, its timers, its slot.
func (d *detached) end() {
	d.mu.Lock()
	d.ended, d.running = true, false
	d.mu.Unlock()
	d.life.Stop()
	d.beat.Stop()
	_ = d.conn.Close() // the browser reconnects with its Last-Event-ID
	d.c.hub.leave(d.p.ID, d.l)
}

// peerGone tells a client that closed its end: a read that does not
// wait (a millisecond's deadline) finds the end of the stream, where a
// live client has sent nothing.
func peerGone(conn net.Conn) bool {
	if err := conn.SetReadDeadline(time.Now().Add(time.Millisecond)); err != nil {
		return true
	}
	var b [64]byte
	_, err := conn.Read(b[:])
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}
