package adminauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"
)

// fakeTokens is a TokenStore in memory (handler unit tests only).
type fakeTokens struct {
	byHash map[string]Principal
	err    error
}

func (f *fakeTokens) LookupToken(_ context.Context, hash string) (Principal, error) {
	if f.err != nil {
		return Principal{}, f.err
	}
	p, ok := f.byHash[hash]
	if !ok {
		return Principal{}, ErrUnknownToken
	}
	return p, nil
}

func TestRoles(t *testing.T) {
	for _, c := range []struct {
		have, need Role
		ok         bool
	}{
		{Admin, Admin, true}, {Admin, Editor, true}, {Admin, Viewer, true},
		{Editor, Admin, false}, {Editor, Editor, true}, {Editor, Viewer, true},
		{Viewer, Admin, false}, {Viewer, Editor, false}, {Viewer, Viewer, true},
		{Role("root"), Viewer, false}, {Admin, Role("root"), false}, {"", Viewer, false},
	} {
		if got := c.have.Allows(c.need); got != c.ok {
			t.Errorf("%q.Allows(%q) = %v, want %v", c.have, c.need, got, c.ok)
		}
	}
	for _, r := range Roles {
		if got, err := ParseRole(string(r)); err != nil || got != r {
			t.Errorf("ParseRole(%q) = %q, %v", r, got, err)
		}
	}
	for _, bad := range []string{"", "Admin", "root", " viewer"} {
		if _, err := ParseRole(bad); err == nil {
			t.Errorf("ParseRole(%q) accepted", bad)
		}
	}
}

func TestCheckTokenName(t *testing.T) {
	for name, ok := range map[string]bool{
		"ci": true, "ann.editor_2-b": true, "": false, "admin-token": false, "two words": false,
		"ann@example.com": false, string(make([]byte, MaxTokenName+1)): false,
	} {
		if err := CheckTokenName(name); (err == nil) != ok {
			t.Errorf("CheckTokenName(%q) = %v, want ok %v", name, err, ok)
		}
	}
}

// TestRequire: each role's token on each route's role, the configured
// token as admin, the principal in the context, 403 as JSON, and a store
// away answered 503, not 401.
func TestRequire(t *testing.T) {
	e := newGuardEnv()
	ts := &fakeTokens{byHash: map[string]Principal{}}
	tokens := map[Role]string{}
	for _, r := range Roles {
		tok := NewToken()
		tokens[r] = tok
		ts.byHash[HashToken(tok)] = Principal{Name: "t-" + string(r), Role: r}
	}
	g := New(right, func(*http.Request) string { return e.client }, func() time.Time { return e.now }).WithTokens(ts)
	var seen Principal
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, found := FromContext(r.Context())
		if !found {
			t.Error("no principal in the context")
		}
		seen = p
		w.WriteHeader(http.StatusNoContent)
	})
	for _, need := range Roles {
		h := g.Require(need, ok)
		for _, have := range Roles {
			rec := e.do(h, e.withBearer("Bearer "+tokens[have]))
			want := http.StatusForbidden
			if have.Allows(need) {
				want = http.StatusNoContent
			}
			if rec.Code != want {
				t.Fatalf("%s token on a %s route: %d, want %d", have, need, rec.Code, want)
			}
			if want == http.StatusNoContent && seen != (Principal{Name: "t-" + string(have), Role: have}) {
				t.Fatalf("%s token: principal %+v", have, seen)
			}
			if want == http.StatusForbidden {
				var body map[string]string
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["error"] == "" || rec.Header().Get("Content-Type") != "application/json" {
					t.Fatalf("403 body %q (%v), type %q", rec.Body, err, rec.Header().Get("Content-Type"))
				}
			}
		}
		if c := e.do(h, e.withBearer("Bearer "+right)).Code; c != http.StatusNoContent || seen != EnvPrincipal {
			t.Fatalf("the configured token on a %s route: %d, principal %+v", need, c, seen)
		}
	}
	// Basic (asynqmon) is for admins only.
	basic := g.Basic("test", ok)
	if c := e.do(basic, e.withBasic(tokens[Editor])).Code; c != http.StatusForbidden {
		t.Fatalf("an editor's token on Basic: %d, want 403", c)
	}
	if c := e.do(basic, e.withBasic(tokens[Admin])).Code; c != http.StatusNoContent {
		t.Fatalf("an admin's stored token on Basic: %d", c)
	}

	// The store away: 503 for a stored token, never 401; the configured
	// token still passes.
	ts.err = errors.New("connection refused")
	rec := e.do(g.Require(Viewer, ok), e.withBearer("Bearer "+tokens[Admin]))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("a stored token while the store is away: %d, want 503", rec.Code)
	}
	if c := e.do(g.Require(Admin, ok), e.withBearer("Bearer "+right)).Code; c != http.StatusNoContent {
		t.Fatalf("the configured token while the store is away: %d", c)
	}
	if _, err := g.Authenticate(context.Background(), tokens[Viewer]); !errors.Is(err, ErrTokenStore) || errors.Is(err, ErrUnknownToken) {
		t.Fatalf("Authenticate with the store away: %v, want ErrTokenStore", err)
	}
	ts.err = nil
	delete(ts.byHash, HashToken(tokens[Viewer])) // revoked
	if c := e.do(g.Require(Viewer, ok), e.withBearer("Bearer "+tokens[Viewer])).Code; c != http.StatusUnauthorized {
		t.Fatalf("a revoked token: %d, want 401", c)
	}
	// A guard with a store but no configured token is open to stored ones.
	stored := New("", func(*http.Request) string { return e.client }, nil).WithTokens(ts)
	if c := e.do(stored.Require(Editor, ok), e.withBearer("Bearer "+tokens[Editor])).Code; c != http.StatusNoContent {
		t.Fatalf("a stored token without a configured one: %d", c)
	}
	if c := e.do(stored.Require(Editor, ok), e.withBearer("Bearer ")).Code; c != http.StatusUnauthorized {
		t.Fatalf("an empty token without a configured one: %d, want 401", c)
	}
}

// TestStoreFailuresCountInTheBudget: while the store is away a guesser
// cannot try the configured token freely: store failures use up the
// budget, and past it are held like wrong tokens (still answered 503).
func TestStoreFailuresCountInTheBudget(t *testing.T) {
	e := newGuardEnv()
	ts := &fakeTokens{err: errors.New("connection refused")}
	g := New(right, func(*http.Request) string { return e.client }, func() time.Time { return e.now }).WithTokens(ts)
	g.hold = func(d time.Duration) { e.holds = append(e.holds, d) }
	h := g.Require(Admin, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for i := 0; i < FailuresPerMinute+1; i++ {
		if c := e.do(h, e.withBearer("Bearer guess")).Code; c != http.StatusServiceUnavailable {
			t.Fatalf("guess %d with the store away: %d, want 503", i+1, c)
		}
	}
	if len(e.holds) != 1 {
		t.Fatalf("holds %v, want one past the budget", e.holds)
	}
	if c := e.do(h, e.withBearer("Bearer "+right)).Code; c != http.StatusNoContent {
		t.Fatalf("the right token past the budget: %d", c)
	}
}
