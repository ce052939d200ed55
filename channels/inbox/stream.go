package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/newsletter/newsletter/channels"
)

// Bounds of a stream (docs/security.md).
const (
	// streamLife is how long one stream lasts: then it ends and the
	// browser's EventSource reconnects with its Last-Event-ID, so a
	// replica's streams turn over and none is held forever.
	streamLife = 30 * time.Minute
	// heartbeat is how often an idle stream writes a comment (a proxy
	// keeps it open; a dead client is found by the failed write) and
	// reads its log (a lost notice costs at most this long).
	heartbeat = 25 * time.Second
	// writeTimeout bounds one write to the client.
	writeTimeout = 10 * time.Second
	// catchUp is the most log entries one read takes; a reader further
	// behind gets the rest on the next read, at once.
	catchUp = 200
	// retryMS is the reconnection delay the stream asks of the browser.
	retryMS = 3000
)

// stream serves GET /stream: the reader's changes as server-sent events,
// each with the log id as its id:
//
//	event: message   a new message (the list's JSON of it)
//	event: update    a message's state changed (the same JSON)
//	event: count     {"unread":n}
//	event: reset     the log no longer reaches back to Last-Event-ID:
//	                 the reader refetches the list
//
// Without Last-Event-ID it starts with the count, at the log's newest id;
// with one, it first sends everything after it.
func (c *Channel) stream(w http.ResponseWriter, r *http.Request, p channels.Person) {
	rc := http.NewResponseController(w)
	// The server's read deadline would end the stream (its background
	// read fails, which cancels the request); streamLife bounds it.
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		writeError(w, http.StatusInternalServerError, "could not open a stream")
		return
	}
	if p.ID == 0 {
		c.notYet(w, rc)
		return
	}
	l, err := c.hub.join(p.ID)
	if err != nil && c.hub.prune(p.ID) > 0 {
		l, err = c.hub.join(p.ID) // a stream of theirs had gone: a reload
	}
	if err != nil {
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusServiceUnavailable, "too many open streams, retry later")
		return
	}
	// Its first change must not be published before this process
	// listens.
	rctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	c.hub.ready(rctx)
	cancel()
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("last_event_id") // a client that cannot set headers
	}
	if _, _, ok := parseLogID(last); !ok {
		last = ""
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: pass each event on
	if r.ProtoMajor == 1 {
		if conn := hijack(rc, h); conn != nil {
			c.detach(conn, p, l, last)
			return
		}
	}
	defer c.hub.leave(p.ID, l)
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, deadline: rc.SetWriteDeadline, flush: rc.Flush}
	s.printf("retry: %d\n\n", retryMS)
	ctx := r.Context()
	if last == "" {
		if last, err = c.start(ctx, p, s); err != nil {
			return
		}
	}
	life := time.NewTimer(streamLife)
	defer life.Stop()
	beat := time.NewTicker(c.heartbeat)
	defer beat.Stop()
	for {
		if last, err = c.sendSince(ctx, p, s, last); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-l.done:
			return
		case <-life.C:
			return
		case <-beat.C:
			if s.printf(": ping\n\n"); s.err != nil {
				return
			}
		case <-l.wake:
		}
	}
}

// notYetRetry is how soon the browser of someone with no account yet
// asks again (EventSource reconnects when a stream ends).
const notYetRetry = time.Minute

// notYet answers the stream of someone with no account yet (a valid
// signature, nobody of that address): their empty count, and the end,
// with a minute's retry. They hold no stream of the process's, and no
// one such reader's tabs can take another's place; once they are a
// reader, the next reconnect is their stream, from the log's start.
func (c *Channel) notYet(w http.ResponseWriter, rc *http.ResponseController) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, deadline: rc.SetWriteDeadline, flush: rc.Flush}
	s.printf("retry: %d\n\n", notYetRetry.Milliseconds())
	s.event("0-0", "count", `{"unread":0}`)
}

// start sends a fresh stream's first event, the count, with the log's
// newest id: the stream goes on from there.
func (c *Channel) start(ctx context.Context, p channels.Person, s *sse) (string, error) {
	head, n := "0-0", int64(0)
	if p.ID > 0 {
		var err error
		if head, n, err = c.headAndUnread(ctx, p.ID); err != nil {
			return "", err
		}
	}
	s.event(head, "count", fmt.Sprintf(`{"unread":%d}`, n))
	return head, s.err
}

// headAndUnread reads person id's log's newest id and unread count, in
// one of the streams' read slots.
func (c *Channel) headAndUnread(ctx context.Context, id int64) (head string, n int64, err error) {
	release, err := c.hub.read(ctx)
	if err != nil {
		return "", 0, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if head, err = c.store.head(ctx, id); err != nil {
		return "", 0, err
	}
	n, err = c.store.unread(ctx, id)
	return head, n, err
}

// sendSince sends p's changes after last and answers the id it got to.
func (c *Channel) sendSince(ctx context.Context, p channels.Person, s *sse, last string) (string, error) {
	if p.ID == 0 {
		return last, nil
	}
	for {
		release, err := c.hub.read(ctx)
		if err != nil {
			return last, nil // the stream is ending
		}
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		changes, reset, err := c.store.since(rctx, p.ID, last, catchUp)
		var head string
		var n int64
		if reset {
			// Refetch, and the count as of now: nothing after the reset
			// may come to correct a stale one.
			if head, err = c.store.head(rctx, p.ID); err == nil {
				n, err = c.store.unread(rctx, p.ID)
			}
		}
		cancel()
		release() // before the writes: a slow client holds no slot
		if reset && err == nil {
			s.event(head, "reset", "{}")
			s.event(head, "count", fmt.Sprintf(`{"unread":%d}`, n))
			last = head
		}
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("inbox: read a reader's log", "err", err)
			}
			return last, nil // the heartbeat tries again
		}
		for _, ch := range changes {
			data := ch.Data
			switch ch.Kind {
			case gone:
				last = ch.ID
				continue
			case "message", "update":
				data = wire(ch.Data)
			}
			s.event(ch.ID, ch.Kind, data)
			last = ch.ID
		}
		if s.err != nil {
			return last, s.err
		}
		if len(changes) < catchUp {
			return last, nil
		}
	}
}

// wire is a stored message as the reader API shows it (without the
// stored-only fields).
func wire(raw string) string {
	m, err := decode(raw)
	if err != nil {
		return "{}"
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// sse writes server-sent events, each flushed at once under a write
// deadline; the first failure sticks. Its writer is the response's, or
// a detached stream's connection (flush nil: each event is one write).
type sse struct {
	w        io.Writer
	deadline func(time.Time) error
	flush    func() error
	err      error
}

func (s *sse) printf(format string, args ...any) {
	if s.err != nil {
		return
	}
	if err := s.deadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
		return
	}
	if _, err := fmt.Fprintf(s.w, format, args...); err != nil {
		s.err = err
		return
	}
	if s.flush != nil {
		s.err = s.flush()
	}
}

// event writes one event. Data is one line of JSON (no newline can be in
// it: encoding/json and cjson escape them).
func (s *sse) event(id, kind, data string) {
	s.printf("id: %s\nevent: %s\ndata: %s\n\n", id, kind, data)
}
