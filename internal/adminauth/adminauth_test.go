package adminauth

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestGuard(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	client := "203.0.113.5"
	g := New("a-long-admin-token-0123", func(*http.Request) string { return client }, func() time.Time { return now })
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	bearer, basic := g.Bearer(ok), g.Basic("test", ok)
	do := func(h http.Handler, set func(*http.Request)) int {
		req := httptest.NewRequest("GET", "/", nil)
		set(req)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	withBearer := func(v string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", v) }
	}
	if c := do(bearer, withBearer("Bearer a-long-admin-token-0123")); c != http.StatusNoContent {
		t.Fatalf("the right token: %d", c)
	}
	// The token alone, without "Bearer ", is not accepted.
	if c := do(bearer, withBearer("a-long-admin-token-0123")); c != http.StatusUnauthorized {
		t.Fatalf("a raw token: %d, want 401", c)
	}
	if c := do(basic, func(r *http.Request) { r.SetBasicAuth("admin", "a-long-admin-token-0123") }); c != http.StatusNoContent {
		t.Fatalf("basic auth: %d", c)
	}
	// Guessing: after FailuresPerMinute failures (one is above), 429,
	// even with the right token, for this client only.
	for i := 1; i < FailuresPerMinute; i++ {
		if c := do(bearer, withBearer("Bearer guess")); c != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i+1, c)
		}
	}
	if c := do(basic, func(r *http.Request) { r.SetBasicAuth("admin", "a-long-admin-token-0123") }); c != http.StatusTooManyRequests {
		t.Fatalf("after %d failures: %d, want 429", FailuresPerMinute, c)
	}
	client = "198.51.100.7"
	if c := do(bearer, withBearer("Bearer a-long-admin-token-0123")); c != http.StatusNoContent {
		t.Fatalf("another client: %d", c)
	}
	client = "203.0.113.5"
	now = now.Add(time.Minute)
	if c := do(bearer, withBearer("Bearer a-long-admin-token-0123")); c != http.StatusNoContent {
		t.Fatalf("a minute later: %d", c)
	}
	// No token configured: the route does not exist.
	closed := New("", func(*http.Request) string { return client }, nil)
	if c := do(closed.Bearer(ok), withBearer("Bearer ")); c != http.StatusNotFound {
		t.Fatalf("no token configured: %d, want 404", c)
	}
}
