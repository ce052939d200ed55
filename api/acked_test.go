package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/internal/redisconn"
)

// fakeAcker answers Ack with err and counts the calls.
type fakeAcker struct {
	err   error
	calls atomic.Int32
}

func (f *fakeAcker) Ack(context.Context) error { f.calls.Add(1); return f.err }

// ackServer is a Server with the Acker ack and a few routes of its own:
// a change that answers 201 with a Location and a body, one that answers
// 400, one that writes nothing, one that writes a body without a status,
// and a read.
func ackServer(t *testing.T, ack Acker) (*Server, *Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	s := New(Config{}, Deps{Acker: ack, Metrics: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Handle("POST /made", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", "/made/1")
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set(idempotencyReplayedHeader, "true") // a replay's answer is refused like any other
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "made it")
	}))
	s.Handle("POST /bad", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no such thing", http.StatusBadRequest)
	}))
	s.Handle("DELETE /silent", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	s.Handle("PUT /body", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "changed")
	}))
	s.Handle("GET /made", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "a read")
	}))
	return s, m, reg
}

func serve(s *Server, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(method, path, nil)
	r.Header.Set("Accept", "application/json")
	s.ServeHTTP(rec, r)
	return rec
}

// TestAckRefusedIs503WithRetryAfter: a change whose replicas did not
// have it in time is answered 503 with Retry-After, whatever the handler
// answered, and none of the handler's answer goes out.
func TestAckRefusedIs503WithRetryAfter(t *testing.T) {
	for _, c := range []struct {
		err    error
		result string
	}{
		{redisconn.ErrNotAcked, "timeout"},
		{errors.New("redis: i/o timeout"), "error"},
	} {
		ack := &fakeAcker{err: c.err}
		s, m, reg := ackServer(t, ack)
		for _, route := range [][2]string{{"POST", "/made"}, {"DELETE", "/silent"}, {"PUT", "/body"}} {
			rec := serve(s, route[0], route[1])
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != ackRetryAfter {
				t.Fatalf("%s %s with %v: %d Retry-After %q, want 503 with Retry-After", route[0], route[1], c.err, rec.Code, rec.Header().Get("Retry-After"))
			}
			if body := rec.Body.String(); strings.Contains(body, "made it") || strings.Contains(body, "changed") || !strings.Contains(body, "try again") {
				t.Errorf("%s %s: body %q: want the 503's own, not the handler's", route[0], route[1], body)
			}
			if rec.Header().Get("Location") != "" || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get(idempotencyReplayedHeader) != "" {
				t.Errorf("%s %s: headers %v: the handler's Location, Content-Type and Idempotent-Replayed should be gone", route[0], route[1], rec.Header())
			}
		}
		if got := ack.calls.Load(); got != 3 {
			t.Errorf("Ack called %d times for 3 changes", got)
		}
		if n := testutil.CollectAndCount(m.RedisAck); n != 1 {
			t.Errorf("%d result series, want 1 (%s)", n, c.result)
		}
		if got := testutil.ToFloat64(m.Requests.WithLabelValues("POST /made", "503")); got != 1 {
			t.Errorf("the request metric counted %v 503s of POST /made, want 1", got)
		}
		if got := ackWaits(t, reg, c.result); got != 3 {
			t.Errorf("newsletter_redis_ack_seconds{result=%q} counted %d waits, want 3", c.result, got)
		}
	}
}

// ackWaits is how many waits newsletter_redis_ack_seconds counted with
// the result label result.
func ackWaits(t *testing.T, reg *prometheus.Registry, result string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "newsletter_redis_ack_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// TestAckPassesTheHandlersAnswer: with the replicas' acknowledgement the
// handler's answer goes out as it was, after one wait.
func TestAckPassesTheHandlersAnswer(t *testing.T) {
	ack := &fakeAcker{}
	s, _, reg := ackServer(t, ack)
	rec := serve(s, "POST", "/made")
	if rec.Code != http.StatusCreated || rec.Header().Get("Location") != "/made/1" || rec.Body.String() != "made it" {
		t.Fatalf("acked change: %d %v %q, want the handler's 201", rec.Code, rec.Header(), rec.Body.String())
	}
	if rec := serve(s, "PUT", "/body"); rec.Code != http.StatusOK || rec.Body.String() != "changed" {
		t.Fatalf("acked change without a status: %d %q", rec.Code, rec.Body.String())
	}
	if got := ack.calls.Load(); got != 2 {
		t.Errorf("Ack called %d times for 2 changes, want 2", got)
	}
	if got := ackWaits(t, reg, "acked"); got != 2 {
		t.Errorf("newsletter_redis_ack_seconds{result=\"acked\"} counted %d, want 2", got)
	}
}

// TestAckNotForReadsOrRefusals: reads never wait, and neither does an
// answer of 400 or more, which promises nothing.
func TestAckNotForReadsOrRefusals(t *testing.T) {
	ack := &fakeAcker{err: redisconn.ErrNotAcked}
	s, _, _ := ackServer(t, ack)
	for _, method := range []string{"GET", "HEAD"} {
		if rec := serve(s, method, "/made"); rec.Code != http.StatusOK {
			t.Errorf("%s /made: %d, want 200", method, rec.Code)
		}
	}
	if rec := serve(s, "GET", "/healthz"); rec.Code != http.StatusOK {
		t.Errorf("GET /healthz: %d, want 200", rec.Code)
	}
	if rec := serve(s, "POST", "/bad"); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "no such thing") {
		t.Errorf("POST /bad: %d %q, want the handler's 400", rec.Code, rec.Body.String())
	}
	if got := ack.calls.Load(); got != 0 {
		t.Errorf("Ack called %d times for reads and a 400", got)
	}
}

// TestAckOffWithoutAcker: no Acker, no wrapper: a change is answered as
// the handler answers.
func TestAckOffWithoutAcker(t *testing.T) {
	s, m, _ := ackServer(t, nil)
	if rec := serve(s, "POST", "/made"); rec.Code != http.StatusCreated {
		t.Fatalf("POST /made without an Acker: %d", rec.Code)
	}
	if n := testutil.CollectAndCount(m.RedisAck); n != 0 {
		t.Errorf("%d ack series without an Acker", n)
	}
}
