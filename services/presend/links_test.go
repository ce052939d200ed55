package presend

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/netguard"
)

// linkSite answers /ok 200, /gone 404, /nohead 405 to HEAD and 200 to
// GET, /login 403; it counts the requests.
func linkSite(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		switch {
		case r.URL.Path == "/gone":
			w.WriteHeader(http.StatusNotFound)
		case r.URL.Path == "/nohead" && r.Method == http.MethodHead:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case r.URL.Path == "/login":
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func byURL(rs []Result, part string) *Result {
	for i := range rs {
		if strings.Contains(rs[i].Message, part) {
			return &rs[i]
		}
	}
	return nil
}

// TestLinksAnswers: a link that answers is fine (HEAD refused, GET
// asked); one that answers 404 is an error with its fix; 403 is a
// warning; all good is one ok line.
func TestLinksAnswers(t *testing.T) {
	t.Parallel()
	srv, _ := linkSite(t)
	c := NewLinkChecker(netguard.Guard{AllowPrivate: true})
	rs := c.Check(context.Background(), []string{srv.URL + "/ok", srv.URL + "/nohead", srv.URL + "/gone", srv.URL + "/login"})
	if len(rs) != 2 {
		t.Fatalf("want a line for /gone and /login: %+v", rs)
	}
	if r := byURL(rs, "/gone"); r == nil || r.Level != Error || !strings.Contains(r.Message, "404") || r.Fix == "" {
		t.Errorf("/gone: %+v", r)
	}
	if r := byURL(rs, "/login"); r == nil || r.Level != Warning || !strings.Contains(r.Message, "403") {
		t.Errorf("/login: %+v", r)
	}
	rs = c.Check(context.Background(), []string{srv.URL + "/ok", srv.URL + "/nohead"})
	if len(rs) != 1 || rs[0].Level != OK || !strings.Contains(rs[0].Message, "(2)") {
		t.Errorf("all good: %+v", rs)
	}
}

// TestLinksUnreachable: a private address under the SSRF guard, a name
// that does not resolve, and a port nobody listens on are warnings that
// say the server could not check them, never errors.
func TestLinksUnreachable(t *testing.T) {
	t.Parallel()
	srv, n := linkSite(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	guarded := NewLinkChecker(netguard.Guard{})
	rs := guarded.Check(context.Background(), []string{srv.URL + "/gone", "https://no-such-host.invalid/x"})
	if r := byURL(rs, "/gone"); r == nil || r.Level != Warning || !strings.Contains(r.Message, "SSRF guard") {
		t.Errorf("a private address: %+v", r)
	}
	if r := byURL(rs, "no-such-host"); r == nil || r.Level != Warning || !strings.Contains(r.Message, "not checked") {
		t.Errorf("no DNS: %+v", r)
	}
	if n.Load() != 0 {
		t.Errorf("the guard let %d requests through to a loopback address", n.Load())
	}
	open := NewLinkChecker(netguard.Guard{AllowPrivate: true})
	rs = open.Check(context.Background(), []string{closed.URL + "/x"})
	if len(rs) != 1 || rs[0].Level != Warning || !strings.Contains(rs[0].Message, "could not be reached from the server") {
		t.Errorf("nobody listening: %+v", rs)
	}
}

// TestLinksCachedAndBounded: a URL asked again within LinkTTL is not
// asked again, and is after it; over MaxLinks, only MaxLinks are asked,
// with a warning saying so.
func TestLinksCachedAndBounded(t *testing.T) {
	t.Parallel()
	srv, n := linkSite(t)
	c := NewLinkChecker(netguard.Guard{AllowPrivate: true})
	now := time.Now()
	c.now = func() time.Time { return now }
	c.Check(context.Background(), []string{srv.URL + "/ok"})
	c.Check(context.Background(), []string{srv.URL + "/ok"})
	if got := n.Load(); got != 1 {
		t.Fatalf("asked %d times within the TTL, want 1", got)
	}
	now = now.Add(LinkTTL + time.Second)
	c.Check(context.Background(), []string{srv.URL + "/ok"})
	if got := n.Load(); got != 2 {
		t.Fatalf("asked %d times after the TTL, want 2", got)
	}
	urls := make([]string, MaxLinks+5)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/ok?n=%d", srv.URL, i)
	}
	n.Store(0)
	rs := c.Check(context.Background(), urls)
	if got := n.Load(); got != MaxLinks {
		t.Errorf("asked %d links, want %d", got, MaxLinks)
	}
	if rs[0].Level != Warning || !strings.Contains(rs[0].Message, fmt.Sprint(MaxLinks+5)) {
		t.Errorf("no warning of the links left out: %+v", rs[0])
	}
}

// TestLinkCacheBound: the cache keeps at most MaxCachedLinks, the least
// recently used going first.
func TestLinkCacheBound(t *testing.T) {
	t.Parallel()
	c := NewLinkChecker(netguard.Guard{})
	for i := range MaxCachedLinks + 10 {
		c.store(fmt.Sprint(i), linkAnswer{level: OK})
	}
	if _, ok := c.cached("0"); ok {
		t.Error("the oldest entry is still kept")
	}
	if _, ok := c.cached(fmt.Sprint(MaxCachedLinks + 9)); !ok || c.order.Len() != MaxCachedLinks {
		t.Errorf("the newest is gone, or %d kept", c.order.Len())
	}
}

// TestLinkGoneToHeadStaysAnErrorWhenGetHangs: a page whose HEAD answers
// 404 and whose GET never answers within the link's time is an error by
// HEAD's answer, not a "did not answer" warning that a send would pass
// (the probe's finding: a 404 went through a send beside slow links).
func TestLinkGoneToHeadStaysAnErrorWhenGetHangs(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		select { // GET hangs until the client gives up or the test ends
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	c := NewLinkChecker(netguard.Guard{AllowPrivate: true})
	// Time enough for HEAD on a busy machine; the GET then waits it out.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	rs := c.Check(ctx, []string{srv.URL + "/gone-to-head"})
	if r := byURL(rs, "/gone-to-head"); r == nil || r.Level != Error || !strings.Contains(r.Message, "404") {
		t.Fatalf("HEAD 404 and a hanging GET: %+v, want an error naming 404", rs)
	}
}

// TestLinksWithinTheCallersTime: under a caller's deadline shorter than
// LinksBudget (the API's request timeout), links not asked in time are
// warning lines, none naming the LinksBudget the caller never gave.
func TestLinksWithinTheCallersTime(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	urls := make([]string, Parallel+3) // more than run at once: some wait for a slot
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/slow%d", srv.URL, i)
	}
	c := NewLinkChecker(netguard.Guard{AllowPrivate: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rs := c.Check(ctx, urls)
	if len(rs) != len(urls) {
		t.Fatalf("%d lines for %d slow links: %+v", len(rs), len(urls), rs)
	}
	for _, r := range rs {
		if r.Level != Warning || strings.Contains(r.Message, LinksBudget.String()) {
			t.Fatalf("a slow link under a 1 s caller: %+v (want a warning not naming the %s budget)", r, LinksBudget)
		}
	}
}
