package adminauth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const right = "a-long-admin-token-0123"

// guardEnv is a guard on a fake clock whose holds are recorded (and, when
// advance is set, move the clock), with one handler per scheme.
type guardEnv struct {
	now           time.Time
	client        string
	advance       bool
	holds         []time.Duration
	bearer, basic http.Handler
}

func newGuardEnv() *guardEnv {
	e := &guardEnv{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), client: "203.0.113.5"}
	g := New(right, func(*http.Request) string { return e.client }, func() time.Time { return e.now })
	g.hold = func(d time.Duration) {
		e.holds = append(e.holds, d)
		if e.advance {
			e.now = e.now.Add(d)
		}
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	e.bearer, e.basic = g.Bearer(ok), g.Basic("test", ok)
	return e
}

func (e *guardEnv) do(h http.Handler, set func(*http.Request)) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", "/", nil)
	set(req)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func (e *guardEnv) withBearer(v string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", v) }
}

func (e *guardEnv) withBasic(pass string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth("admin", pass) }
}

func TestGuard(t *testing.T) {
	e := newGuardEnv()
	if c := e.do(e.bearer, e.withBearer("Bearer "+right)).Code; c != http.StatusNoContent {
		t.Fatalf("the right token: %d", c)
	}
	// The token alone, without "Bearer ", is not accepted.
	if c := e.do(e.bearer, e.withBearer(right)).Code; c != http.StatusUnauthorized {
		t.Fatalf("a raw token: %d, want 401", c)
	}
	if c := e.do(e.basic, e.withBasic(right)).Code; c != http.StatusNoContent {
		t.Fatalf("basic auth: %d", c)
	}
	if rec := e.do(e.basic, e.withBasic("guess")); rec.Code != http.StatusUnauthorized || !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("a wrong password: %d %v", rec.Code, rec.Header())
	}
	// No token configured: the route does not exist.
	closed := New("", func(*http.Request) string { return e.client }, nil)
	if c := e.do(closed.Bearer(http.NotFoundHandler()), e.withBearer("Bearer ")); c.Code != http.StatusNotFound {
		t.Fatalf("no token configured: %d, want 404", c.Code)
	}
}

// TestRightTokenAfterWrongOnes: ten wrong tokens from one address (a
// neighbour behind the same NAT) do not lock the operator out, on either
// scheme; the next wrong one is answered 429, and only after a hold.
func TestRightTokenAfterWrongOnes(t *testing.T) {
	e := newGuardEnv()
	for i := 0; i < FailuresPerMinute; i++ {
		if c := e.do(e.bearer, e.withBearer("Bearer guess")).Code; c != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, c)
		}
	}
	if len(e.holds) != 0 {
		t.Fatalf("wrong tokens within the budget were held: %v", e.holds)
	}
	if c := e.do(e.bearer, e.withBearer("Bearer "+right)).Code; c != http.StatusNoContent {
		t.Fatalf("the right Bearer token after %d wrong ones: %d", FailuresPerMinute, c)
	}
	if c := e.do(e.basic, e.withBasic(right)).Code; c != http.StatusNoContent {
		t.Fatalf("the right Basic password after %d wrong ones: %d", FailuresPerMinute, c)
	}
	rec := e.do(e.basic, e.withBasic("guess"))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a wrong token over the budget: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	if len(e.holds) != 1 || e.holds[0] != time.Minute/FailuresPerMinute {
		t.Fatalf("the answer over the budget was held %v, want one turn (%s)", e.holds, time.Minute/FailuresPerMinute)
	}
	// Still the right token passes at once, and another client is
	// answered as usual.
	if c := e.do(e.bearer, e.withBearer("Bearer "+right)).Code; c != http.StatusNoContent || len(e.holds) != 1 {
		t.Fatalf("the right token while over the budget: %d, holds %v", c, e.holds)
	}
	e.client = "198.51.100.7"
	if c := e.do(e.bearer, e.withBearer("Bearer guess")).Code; c != http.StatusUnauthorized || len(e.holds) != 1 {
		t.Fatalf("another client's first wrong token: %d, holds %v", c, e.holds)
	}
}

// TestGuessingIsSlowed: a client over its budget learns its wrong tokens'
// fate one turn after another, however many it sends at once: the holds
// are the budget's turns, never more than MaxHold; one client sending
// them one by one gets no more than the budget's rate.
func TestGuessingIsSlowed(t *testing.T) {
	e := newGuardEnv() // the clock stands still: requests that arrive together
	for i := 0; i < FailuresPerMinute+8; i++ {
		e.do(e.bearer, e.withBearer("Bearer guess"))
	}
	turn := time.Minute / FailuresPerMinute
	want := []time.Duration{turn, 2 * turn, 3 * turn, 4 * turn, 5 * turn, MaxHold, MaxHold, MaxHold}
	if len(e.holds) != len(want) {
		t.Fatalf("holds %v, want %v", e.holds, want)
	}
	for i := range want {
		if e.holds[i] != want[i] {
			t.Fatalf("holds %v, want %v", e.holds, want)
		}
	}

	e = newGuardEnv()
	e.advance = true // one request after another, each waiting its answer
	start := e.now
	const guesses = 100
	for i := 0; i < guesses; i++ {
		if c := e.do(e.bearer, e.withBearer("Bearer guess")).Code; c != http.StatusUnauthorized && c != http.StatusTooManyRequests {
			t.Fatalf("guess %d: %d", i+1, c)
		}
	}
	// The budget: FailuresPerMinute at once, then one a turn.
	if took, least := e.now.Sub(start), time.Duration(guesses-FailuresPerMinute)*turn; took < least {
		t.Fatalf("%d wrong tokens answered in %s, want at least %s", guesses, took, least)
	}
	if c := e.do(e.bearer, e.withBearer("Bearer "+right)).Code; c != http.StatusNoContent {
		t.Fatalf("the right token after %d guesses: %d", guesses, c)
	}
}

func TestCheckToken(t *testing.T) {
	cases := []struct {
		tok string
		ok  bool
	}{
		{"", false},
		{"0123456789abcde", false}, // 15 characters
		{"aaaaaaaaaaaaaaaa", false},
		{"abababababababababababab", false},
		{"abcdefghiabcdefghiabcdefgh", false}, // 9 different
		{"0123456789abcdef", true},
		{"a-long-admin-token-0123", true},
		{"äöüßéèêàâçäöüßéè", true}, // 16 characters (32 bytes), 10 different
		{"äöüßéèêàâçäöü", false},   // 13 characters (26 bytes)
	}
	for _, c := range cases {
		if err := CheckToken(c.tok); (err == nil) != c.ok {
			t.Errorf("CheckToken(%q) = %v, want ok %v", c.tok, err, c.ok)
		}
	}
	for i := 0; i < 100; i++ {
		if tok := NewToken(); CheckToken(tok) != nil {
			t.Fatalf("NewToken made %q, which CheckToken refuses", tok)
		}
	}
}

// TestBlocked: Blocked tells a client over its budget without counting
// (asking does not use the budget up), and knows only that client.
func TestBlocked(t *testing.T) {
	e := newGuardEnv()
	g := New(right, func(*http.Request) string { return e.client }, func() time.Time { return e.now })
	g.hold = func(time.Duration) {}
	req := httptest.NewRequest("POST", "/admin/login", nil)
	for i := 0; i < 3*FailuresPerMinute; i++ {
		if tm := g.Blocked(req); tm != nil {
			t.Fatalf("asked %d times with no failure: blocked", i+1)
		}
	}
	for i := 0; i < FailuresPerMinute; i++ {
		if tm := g.Failed(req); tm != nil {
			t.Fatalf("failure %d within the budget: %v", i+1, tm)
		}
	}
	tm := g.Blocked(req)
	if tm == nil || tm.RetryAfter <= 0 || tm.RetryAfter > time.Minute/FailuresPerMinute {
		t.Fatalf("with the budget used up: %+v, want blocked for at most a turn", tm)
	}
	if g.Client(req) != e.client {
		t.Fatalf("Client: %q", g.Client(req))
	}
	e.client = "198.51.100.7"
	if tm := g.Blocked(req); tm != nil {
		t.Fatalf("another client: %v", tm)
	}
	e.client = "203.0.113.5"
	e.now = e.now.Add(time.Minute / FailuresPerMinute)
	if tm := g.Blocked(req); tm != nil {
		t.Fatalf("a turn later: %v", tm)
	}
}
