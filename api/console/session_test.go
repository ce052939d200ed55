package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/api/console"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/store"
)

func TestSignInSetsAStrictHttpOnlyCookieAndAuditsIt(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	if p := b.get("/admin/"); p.code != http.StatusSeeOther || p.location != "/admin/login" {
		t.Fatalf("signed out, the overview: %d %q", p.code, p.location)
	}
	p := b.post("/admin/login", url.Values{"token": {adminToken}})
	if p.code != http.StatusSeeOther {
		t.Fatalf("login: %d %s", p.code, p.body)
	}
	c := p.header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Max-Age=43200", "Path=/admin/"} {
		if !strings.Contains(c, want) {
			t.Fatalf("cookie %q lacks %s", c, want)
		}
	}
	if strings.Contains(c, "Secure") {
		t.Fatalf("cookie %q is Secure on an http base URL", c)
	}
	mustContain(t, "overview", b.get("/admin/"), "Signed in as <strong>alice</strong> (admin)")
	// Only the hash of the session id is a key.
	id := strings.TrimPrefix(strings.SplitN(c, ";", 2)[0], "newsletter-console=")
	keys, err := redisOf(e).Keys(t.Context(), "nl:console:session:*").Result()
	if err != nil || len(keys) != 1 || strings.Contains(keys[0], id) {
		t.Fatalf("session keys %v (id %s): %v", keys, id, err)
	}
	if got := e.audit.actions(); len(got) != 1 || got[0] != "alice console.signed_in" {
		t.Fatalf("audit: %v", got)
	}
}

func redisOf(e *env) *redis.Client { return e.rdb }

func TestLoginReturnsToTheDeepLinkButNeverLeavesTheSite(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	p := b.get("/admin/issues?status=draft")
	if p.code != http.StatusSeeOther || p.location != "/admin/login?next=%2Fadmin%2Fissues%3Fstatus%3Ddraft" {
		t.Fatalf("deep link: %d %q", p.code, p.location)
	}
	mustContain(t, "login page", b.get(p.location), `name="next" value="/admin/issues?status=draft"`)
	p = b.post("/admin/login", url.Values{"token": {viewerToken}, "next": {"/admin/issues?status=draft"}})
	if p.location != "/admin/issues?status=draft" {
		t.Fatalf("after login: %q", p.location)
	}
	for _, evil := range []string{"https://evil.example/", "//evil.example/admin/", "/\\evil.example", "/admin/../../evil", "/admin/..%2f..%2fevil",
		"javascript:alert(1)", "/admin/\\\\evil.example", "http:/admin/", "/admin//evil.example", "\t/admin/", "/admin/\r\nLocation: x"} {
		p := e.browser(t).post("/admin/login", url.Values{"token": {viewerToken}, "next": {evil}})
		u, err := url.Parse(p.location)
		if p.code != http.StatusSeeOther || err != nil || u.Host != "" || u.Scheme != "" || !strings.HasPrefix(p.location, "/admin/") || strings.HasPrefix(p.location, "//") {
			t.Fatalf("next=%q led to %q", evil, p.location)
		}
		if got := console.SafeNext(evil); strings.Contains(got, "evil") && !strings.HasPrefix(got, "/admin/") {
			t.Fatalf("SafeNext(%q) = %q", evil, got)
		}
	}
	if got := console.SafeNext("//evil.example"); got != "/admin/" {
		t.Fatalf("SafeNext(//evil) = %q", got)
	}
	if got := console.SafeNext("/admin/subscribers/7"); got != "/admin/subscribers/7" {
		t.Fatalf("SafeNext kept no deep link: %q", got)
	}
}

func TestSessionExpiresAfterTwelveHoursAndLogoutEndsItEverywhere(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, editorToken)
	e.clock.add(console.SessionTTL - time.Minute)
	if p := b.get("/admin/issues"); p.code != http.StatusOK {
		t.Fatalf("before expiry: %d", p.code)
	}
	e.clock.add(2 * time.Minute)
	if p := b.get("/admin/issues"); p.code != http.StatusSeeOther || !strings.HasPrefix(p.location, "/admin/login") {
		t.Fatalf("after expiry: %d %q", p.code, p.location)
	}

	// Logout: a copy of the cookie (another tab, a stolen one) is worth
	// nothing afterwards.
	b = e.signedIn(t, editorToken)
	copyJar := e.browser(t)
	u, _ := url.Parse(e.srv.URL + "/admin/")
	copyJar.c.Jar.SetCookies(u, b.c.Jar.Cookies(u))
	if p := copyJar.get("/admin/issues"); p.code != http.StatusOK {
		t.Fatalf("the copied cookie before logout: %d", p.code)
	}
	if p := b.post("/admin/logout", nil); p.code != http.StatusSeeOther || p.location != "/admin/login?done=signed-out" {
		t.Fatalf("logout: %d %q", p.code, p.location)
	}
	if p := copyJar.get("/admin/issues"); p.code != http.StatusSeeOther {
		t.Fatalf("the copied cookie after logout: %d", p.code)
	}
}

func TestRevokingATokenEndsItsSessionsAtOnce(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, viewerToken)
	if err := e.st.RevokeToken(t.Context(), "vic"); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/admin/issues"); p.code != http.StatusSeeOther || !strings.HasPrefix(p.location, "/admin/login") {
		t.Fatalf("revoked: %d %q", p.code, p.location)
	}
	if p := b.post("/admin/login", url.Values{"token": {viewerToken}}); p.code != http.StatusUnauthorized {
		t.Fatalf("a revoked token signs in: %d", p.code)
	}
}

func TestWrongTokensSpendTheGuardsBudget(t *testing.T) {
	e := newEnv(t)
	e.guard.allow = 2
	b := e.browser(t)
	for i, want := range []int{http.StatusUnauthorized, http.StatusUnauthorized, http.StatusTooManyRequests} {
		p := b.post("/admin/login", url.Values{"token": {"guess-" + string(rune('a'+i))}})
		if p.code != want {
			t.Fatalf("wrong token %d: %d, want %d", i, p.code, want)
		}
		if want == http.StatusTooManyRequests && p.header.Get("Retry-After") != "30" {
			t.Fatalf("429 without Retry-After: %v", p.header)
		}
		if p.header.Get("Set-Cookie") != "" {
			t.Fatal("a wrong token got a cookie")
		}
	}
	// The right one still passes.
	b.login(adminToken)
}

// TestCrossSiteFormsAreRefused: every state-changing form, posted from
// another site with a signed-in person's cookie, is 403 and changes
// nothing.
func TestCrossSiteFormsAreRefused(t *testing.T) {
	e := newEnv(t)
	sub := e.subscribe(t, "ann@example.com", "digest")
	b := e.signedIn(t, adminToken)
	before := len(e.audit.actions())
	for _, path := range []string{"/admin/issues", "/admin/items", "/admin/logout", "/admin/subscribers/" + itoa(sub.ID) + "/unsubscribe",
		"/admin/subscribers/" + itoa(sub.ID) + "/erase", "/admin/tokens", "/admin/login"} {
		p := b.postFrom("cross-site", path, url.Values{"subject": {"x"}, "body": {"y"}, "topics": {"digest"}, "token": {adminToken}, "confirm": {"erase"}})
		if p.code != http.StatusForbidden || !strings.Contains(p.body, "sent from another site") {
			t.Fatalf("cross-site POST %s: %d", path, p.code)
		}
	}
	if got, _ := e.st.Get(t.Context(), "ann@example.com"); got.Status != store.Active {
		t.Fatalf("a cross-site form changed the subscriber: %s", got.Status)
	}
	if list, _ := e.st.ListIssues(t.Context(), "", 0, 10); len(list) != 0 {
		t.Fatal("a cross-site form made an issue")
	}
	if len(e.audit.actions()) != before {
		t.Fatalf("audit grew: %v", e.audit.actions())
	}
	// Still signed in: the forged logout did nothing.
	if p := b.get("/admin/issues"); p.code != http.StatusOK {
		t.Fatalf("after the forged logout: %d", p.code)
	}
}

func TestWrongRoleGetsA403Page(t *testing.T) {
	e := newEnv(t)
	viewer := e.signedIn(t, viewerToken)
	editor := e.signedIn(t, editorToken)
	for _, c := range []struct {
		b      *browser
		method string
		path   string
	}{
		{viewer, "GET", "/admin/issues/new"}, {viewer, "POST", "/admin/issues"}, {viewer, "POST", "/admin/items"},
		{editor, "GET", "/admin/tokens"}, {editor, "GET", "/admin/audit"}, {editor, "GET", "/admin/import"},
		{editor, "POST", "/admin/suppressions/1/lift"}, {editor, "POST", "/admin/subscribers/1/erase"},
	} {
		var p page
		if c.method == "GET" {
			p = c.b.get(c.path)
		} else {
			p = c.b.post(c.path, url.Values{"subject": {"x"}})
		}
		if p.code != http.StatusForbidden || !strings.Contains(p.body, "Not allowed") || !strings.Contains(p.body, "Signed in as") {
			t.Fatalf("%s %s: %d\n%s", c.method, c.path, p.code, p.body)
		}
	}
}

// TestRedisAwayIsAPageThatSaysSo: with Redis gone, a signed-in page and
// the sign-in itself answer 503 with a page that names the cause, never
// a stack trace or the driver's error.
func TestRedisAwayIsAPageThatSaysSo(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, adminToken)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = dead.Close() })
	h, err := console.New(console.Config{}, console.Deps{Redis: dead, Store: e.st, Subscriptions: subscriptionsOf(t, e), Guard: e.guard, Tokens: e.tokens,
		Audit: audit.NewTrail(e.st, logredact.New([]byte("x")), quietLog(), nil), AuditLog: e.st, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	e.srv.Config.Handler = h
	for _, p := range []page{b.get("/admin/"), b.post("/admin/login", url.Values{"token": {adminToken}})} {
		if p.code != http.StatusServiceUnavailable || !strings.Contains(p.body, "Redis is not answering") {
			t.Fatalf("Redis away: %d\n%s", p.code, p.body)
		}
		if strings.Contains(p.body, "127.0.0.1:1") || strings.Contains(p.body, "goroutine") {
			t.Fatalf("the page leaks the error:\n%s", p.body)
		}
	}
	// The token store away on a live session: the same page.
	e.srv.Config.Handler = e.h
	e.tokens.mu.Lock()
	e.tokens.away = true
	e.tokens.mu.Unlock()
	if p := b.get("/admin/issues"); p.code != http.StatusServiceUnavailable || !strings.Contains(p.body, "Redis is not answering") {
		t.Fatalf("token store away: %d", p.code)
	}
}

// TestTokensScreen: an admin makes a token (shown once, only its hash
// stored), signs in with it elsewhere, and revoking it ends that session.
func TestTokensScreen(t *testing.T) {
	e := newEnv(t)
	root := e.signedIn(t, envToken)
	mustContain(t, "tokens", root.get("/admin/tokens"), "alice", "ed", "vic")
	if p := root.post("/admin/tokens", url.Values{"name": {"bad name!"}, "role": {"editor"}}); p.code != 400 {
		t.Fatalf("bad name: %d", p.code)
	}
	if p := root.post("/admin/tokens", url.Values{"name": {"ed"}, "role": {"editor"}}); p.code != 409 {
		t.Fatalf("a name taken: %d", p.code)
	}
	p := root.post("/admin/tokens", url.Values{"name": {"zoe"}, "role": {"editor"}})
	m := regexp.MustCompile(`<p class="token" id="new-token">([0-9a-f]+)</p>`).FindStringSubmatch(p.body)
	if p.code != 201 || m == nil {
		t.Fatalf("create: %d\n%s", p.code, p.body)
	}
	if strings.Contains(root.get("/admin/tokens").body, m[1]) {
		t.Fatal("the token is shown again")
	}
	zoe := e.signedIn(t, m[1])
	mustContain(t, "zoe", zoe.get("/admin/issues"), "Signed in as <strong>zoe</strong> (editor)")
	if p := root.post("/admin/tokens/zoe/revoke", nil); p.code != 303 {
		t.Fatalf("revoke: %d", p.code)
	}
	if p := zoe.get("/admin/issues"); p.code != 303 {
		t.Fatalf("a revoked token's session: %d", p.code)
	}
	if got := e.audit.actions(); got[0] != "admin-token token.revoked" || got[2] != "admin-token token.created" {
		t.Fatalf("audit: %v", got)
	}
}
