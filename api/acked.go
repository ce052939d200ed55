package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/newsletter/newsletter/internal/redisconn"
)

// Acker waits until the writes made so far are on enough Redis replicas
// (*redisconn.Acker): redisconn.ErrNotAcked when too few had them in
// time, another error when Redis did not answer.
type Acker interface {
	Ack(ctx context.Context) error
}

// ackRetryAfter is the Retry-After of a change whose replicas did not
// acknowledge it in time, in seconds: a replica that lags catches up in
// moments, and the changes are by address or by id, so doing one again
// is harmless.
const ackRetryAfter = "1"

// ackDiscarded are the headers of the handler's answer that describe that
// answer (where it sends the browser, the cookie it sets, its body): a
// 503 in its place carries none of them. The security headers the
// routes set stay.
var ackDiscarded = []string{"Location", "Set-Cookie", "Content-Type", "Content-Length", "Content-Disposition",
	"Content-Encoding", "ETag", "Last-Modified", "Refresh", "Link", idempotencyReplayedHeader}

// ackGate is where an answer for a change waits for the replicas: for a
// request that may change something (any method but GET, HEAD, OPTIONS
// and TRACE) with an Acker, w is wrapped so that the first status under
// 400 waits for Ack before it goes out, and becomes 503 with Retry-After
// when Ack fails. done answers what the handler left unanswered (an
// implicit 200) the same way. Every route, the console's and the mounted
// ones too, passes here once (ServeHTTP).
func (s *Server) ackGate(w http.ResponseWriter, r *http.Request) (gated http.ResponseWriter, done func()) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return w, func() {}
	}
	if s.deps.Acker == nil {
		return w, func() {}
	}
	aw := &ackWriter{ResponseWriter: w, r: r, s: s}
	return aw, aw.finish
}

type ackState int

const (
	ackPending ackState = iota
	ackPassed           // the handler's answer goes out
	ackRefused          // a 503 went out instead; the handler's is discarded
)

// ackWriter holds a change's answer until the replicas have the change.
type ackWriter struct {
	http.ResponseWriter
	r     *http.Request
	s     *Server
	state ackState
}

func (w *ackWriter) WriteHeader(code int) {
	switch {
	case w.state == ackRefused:
		return
	case w.state == ackPassed || code < 200: // 1xx: informational, not the answer
	case code >= 400 || w.s.acked(w.r):
		w.state = ackPassed
	default:
		w.refuse()
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *ackWriter) Write(b []byte) (int, error) {
	if w.state == ackPending {
		w.WriteHeader(http.StatusOK)
	}
	if w.state == ackRefused {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends the answer so far, which commits its status: it waits as
// WriteHeader does.
func (w *ackWriter) Flush() {
	if w.state == ackPending {
		w.WriteHeader(http.StatusOK)
	}
	if w.state == ackPassed {
		// A writer that cannot flush sends the answer at the end anyway.
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *ackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish answers for a handler that wrote nothing: net/http would send
// 200, a success like any other.
func (w *ackWriter) finish() {
	if w.state == ackPending {
		w.WriteHeader(http.StatusOK)
	}
}

func (w *ackWriter) refuse() {
	w.state = ackRefused
	h := w.Header()
	for _, k := range ackDiscarded {
		h.Del(k)
	}
	h.Set("Retry-After", ackRetryAfter)
	h.Set("Cache-Control", "no-store")
	fail(w.ResponseWriter, w.r, http.StatusServiceUnavailable, "your change could not be confirmed as saved; please try again in a moment")
}

// acked runs the Acker for r's changes and counts the wait
// (newsletter_redis_ack_seconds). The wait has its own bound (the
// Acker's timeout), not what is left of the request's: a change made
// near the request's deadline still gets its full wait, and an answer.
func (s *Server) acked(r *http.Request) bool {
	start := time.Now()
	err := s.deps.Acker.Ack(context.WithoutCancel(r.Context()))
	result := "acked"
	switch {
	case errors.Is(err, redisconn.ErrNotAcked):
		result = "timeout"
	case err != nil:
		result = "error"
		s.deps.Log.Warn("redis: waiting for the replicas failed; the change was answered 503", "route", r.Pattern, "err", err)
	}
	s.deps.Metrics.RedisAck.WithLabelValues(result).Observe(time.Since(start).Seconds())
	return err == nil
}
