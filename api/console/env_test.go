package console_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/api/console"
	"github.com/newsletter/newsletter/channels/webhook"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/accounts"
	"github.com/newsletter/newsletter/services/catalog"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/services/media"
	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker/catalogmail"
)

// The tokens of the tests' three people.
const (
	adminToken  = "admin-token-0123456789"
	editorToken = "editor-token-0123456789"
	viewerToken = "viewer-token-0123456789"
)

// envToken is NEWSLETTER_ADMIN_TOKEN in the tests.
const envToken = "env-token-0123456789abcdef"

// tokenStore is the store's tokens, which can be made to fail.
type tokenStore struct {
	*store.Redis
	mu   sync.Mutex
	away bool
}

func (ts *tokenStore) LookupToken(ctx context.Context, hash string) (console.Principal, error) {
	ts.mu.Lock()
	away := ts.away
	ts.mu.Unlock()
	if away {
		return console.Principal{}, errors.New("dial tcp: connection refused")
	}
	return ts.Redis.LookupToken(ctx, hash)
}

// budgetGuard is the real guard, with a failure budget the test sets
// (the real one holds the answer over its budget in real time).
type budgetGuard struct {
	*adminauth.Guard
	mu    sync.Mutex
	wrong int
	allow int
	// over makes Blocked answer that every client is over its budget.
	over bool
}

func (g *budgetGuard) Blocked(r *http.Request) *adminauth.TooManyError {
	g.mu.Lock()
	over := g.over
	g.mu.Unlock()
	if over {
		return &adminauth.TooManyError{RetryAfter: 30 * time.Second}
	}
	return g.Guard.Blocked(r)
}

// clientHeader names a test browser's client to the guard (each browser
// is "client" unless it says otherwise).
const clientHeader = "X-Test-Client"

func testClientKey(r *http.Request) string {
	if c := r.Header.Get(clientHeader); c != "" {
		return c
	}
	return "client"
}

func (g *budgetGuard) AuthenticateRequest(r *http.Request, token string) (console.Principal, error) {
	p, err := g.Guard.AuthenticateRequest(r, token)
	if errors.Is(err, adminauth.ErrUnknownToken) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.wrong++; g.wrong > g.allow {
			return p, &adminauth.TooManyError{RetryAfter: 30 * time.Second}
		}
	}
	return p, err
}

// auditOf reads the audit log as "actor action" lines, newest first.
type auditOf struct {
	t  testing.TB
	st *store.Redis
}

func (a auditOf) entries() []audit.Entry {
	a.t.Helper()
	list, err := a.st.AuditEntries(context.Background(), "", 100)
	if err != nil {
		a.t.Fatal(err)
	}
	return list
}

func (a auditOf) actions() []string {
	a.t.Helper()
	var out []string
	for _, e := range a.entries() {
		out = append(out, e.Actor+" "+e.Action)
	}
	return out
}

// fakeMail renders a preview as the body in a paragraph and records
// test sends.
type fakeMail struct {
	mu    sync.Mutex
	tests [][]string
}

func (f *fakeMail) Preview(_ context.Context, is store.Issue, topic, format string) (string, []byte, error) {
	return "text/html", []byte("<p>" + topic + ": " + is.Subject + " / " + is.Body + "</p>"), nil
}

// HTMLSize is the body's length: a test makes an issue as large as it
// needs.
func (f *fakeMail) HTMLSize(_ context.Context, is store.Issue) (int, error) {
	return len(is.Body), nil
}

func (f *fakeMail) SendTest(_ context.Context, _ store.Issue, emails []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tests = append(f.tests, emails)
	return nil
}

// clock is a test's clock: now, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

type env struct {
	srv    *httptest.Server
	h      *console.Handler
	st     *store.Redis
	tokens *tokenStore
	audit  auditOf
	mail   *fakeMail
	guard  *budgetGuard
	clock  *clock
	insp   *asynq.Inspector
	rdb    *redis.Client
	subs   console.Subscriptions
	// listJobs and listRunner: the list's jobs, run by the test as the
	// worker runs them.
	listJobs   *listjobs.Jobs
	listRunner *listjobs.Runner
	// passwords hashes the console's passwords: the tests' own, so
	// they can count its hashes.
	passwords *accounts.Hasher
	// holds are the waits before failed sign-ins were answered: the
	// accounts' (console.Deps.Hold) and the client budget's.
	holds holds
	// eng is what the issues' readers did, as the test says (the
	// counted redirect's side of a report).
	eng fakeEngagement
	// settings are the console's settings cache (the API's, in the
	// binary).
	settings *settings.Cache
	// catalog is the console's topics, sequence and templates (the
	// API's, in the binary).
	catalog *catalog.Live
}

// fakeEngagement gives each issue the engagement the test put there.
type fakeEngagement map[int64]store.Engagement

func (f fakeEngagement) IssueEngagement(_ context.Context, id int64) (store.Engagement, error) {
	return f[id], nil
}

// holds records waits instead of waiting.
type holds struct {
	mu      sync.Mutex
	account []time.Duration
	client  []time.Duration
}

func (h *holds) onAccount(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.account = append(h.account, d)
}
func (h *holds) onClient(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.client = append(h.client, d)
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func subscriptionsOf(_ *testing.T, e *env) console.Subscriptions { return e.subs }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, accounts.NewHasher(2, time.Minute), func(st *store.Redis) *store.Redis { return st })
}

// newEnvHashing is newEnv whose passwords are hashed by passwords.
func newEnvHashing(t testing.TB, passwords *accounts.Hasher) *env {
	t.Helper()
	return newEnvWith(t, passwords, func(st *store.Redis) *store.Redis { return st })
}

// newEnvOf is newEnv whose store is the one adjust makes of it.
func newEnvOf(t testing.TB, adjust func(*store.Redis) *store.Redis) *env {
	t.Helper()
	return newEnvWith(t, accounts.NewHasher(2, time.Minute), adjust)
}

// newEnvWith is newEnv with its password hasher and its store adjusted.
func newEnvWith(t testing.TB, passwords *accounts.Hasher, adjust func(*store.Redis) *store.Redis) *env {
	t.Helper()
	rdb, _ := redistest.New(t, redistest.DBConsole)
	st := adjust(store.NewRedis(rdb))
	client := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	jobs := tasks.NewDispatcher(client, st, nil)
	t.Cleanup(jobs.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := &env{st: st, tokens: &tokenStore{Redis: st}, audit: auditOf{t, st}, mail: &fakeMail{},
		clock: &clock{t: time.Now()}, insp: insp, rdb: rdb, eng: fakeEngagement{}, passwords: passwords}
	for tok, p := range map[string]console.Principal{adminToken: {Name: "alice", Role: console.Admin},
		editorToken: {Name: "ed", Role: console.Editor}, viewerToken: {Name: "vic", Role: console.Viewer}} {
		if _, err := st.CreateToken(context.Background(), adminauth.HashToken(tok), adminauth.StoredToken{Name: p.Name, Role: p.Role}); err != nil {
			t.Fatal(err)
		}
	}
	e.guard = &budgetGuard{Guard: adminauth.New(envToken, testClientKey, nil).WithTokens(e.tokens).WithHold(e.holds.onClient), allow: 1000}
	trail := audit.NewTrail(st, logredact.New([]byte("test-secret")), log, nil)
	e.listJobs = listjobs.NewJobs(rdb)
	apiSrv := api.New(api.Config{}, api.Deps{Store: st, Jobs: jobs, Queue: client, Tasks: insp, Log: log, ListJobs: e.listJobs, Audit: trail})
	e.subs = apiSrv
	e.listRunner = &listjobs.Runner{Jobs: e.listJobs, Store: st, Audit: trail, Now: time.Now, Log: log,
		Applier: &listjobs.Applier{Store: st, Topics: topics.Default(0), Tasks: insp}}
	e.settings = settings.NewCache(st, settings.Options{Defaults: settings.Defaults("News <news@example.com>"), Log: log})
	live, err := catalog.Open(context.Background(), st, catalog.Options{First: topics.Default(0), Check: catalogmail.Check, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := live.ImportFirst(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.catalog = live
	h, err := console.New(console.Config{BaseURL: "http://newsletter.test", Endpoints: netguard.Guard{AllowPrivate: true}, DKIMDomain: "example.com"}, console.Deps{
		Settings: e.settings, SettingsStore: st, Catalog: live, Templates: catalogmail.Builtins{},
		Redis: rdb, Store: st, Renderer: e.mail, Steps: e.mail, Jobs: jobs, Queue: client,
		Webhooks: &webhooks.Service{Store: st, Queue: client, Guard: netguard.Guard{AllowPrivate: true}, NewSecret: webhook.NewSecret, Now: e.clock.Now}, Subscriptions: apiSrv, People: st, Requests: apiSrv, List: apiSrv,
		Guard: e.guard, EnvToken: envToken, Tokens: e.tokens, TokenAdmin: st, Accounts: st, Hold: e.holds.onAccount, Passwords: e.passwords,
		Audit: trail, AuditLog: st, Queues: insp, Log: log, Now: e.clock.Now,
		TestGate:   &issues.TestGate{Recipients: []string{"me@example.com", "you@example.com"}, Now: e.clock.Now},
		Engagement: e.eng,
		Media:      media.New(&media.Dir{Path: t.TempDir(), Base: "http://newsletter.test"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// browser is one person's client: a cookie jar, no redirects followed,
// and the headers a browser sends on a same-origin form.
type browser struct {
	t testing.TB
	e *env
	c *http.Client
	// client, when set, is the client the guard sees (clientHeader).
	client string
}

func (e *env) browser(t testing.TB) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, e: e, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	code     int
	body     string
	location string
	header   http.Header
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	if b.client != "" {
		req.Header.Set(clientHeader, b.client)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{code: resp.StatusCode, body: string(body), location: resp.Header.Get("Location"), header: resp.Header}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, _ := http.NewRequest("GET", b.e.srv.URL+path, nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.do(req)
}

// post sends a form as a browser does from one of the console's pages.
func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	return b.postFrom("same-origin", path, form)
}

func (b *browser) postFrom(site, path string, form url.Values) page {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", site)
	if site == "cross-site" {
		req.Header.Set("Origin", "https://evil.example")
	} else {
		req.Header.Set("Origin", b.e.srv.URL)
	}
	return b.do(req)
}

// login signs in with token and checks it worked.
func (b *browser) login(token string) {
	b.t.Helper()
	p := b.post("/admin/login", url.Values{"token": {token}})
	if p.code != http.StatusSeeOther || p.location != "/admin/" {
		b.t.Fatalf("login: %d to %q\n%s", p.code, p.location, p.body)
	}
}

func (e *env) signedIn(t testing.TB, token string) *browser {
	b := e.browser(t)
	b.login(token)
	return b
}

func (e *env) subscribe(t *testing.T, email string, topics ...string) store.Subscriber {
	t.Helper()
	sub, err := e.st.Subscribe(context.Background(), store.SubscribeRequest{Email: email, Activate: true, Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

func mustContain(t *testing.T, what string, p page, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(p.body, w) {
			t.Fatalf("%s: the page (%d) lacks %q:\n%s", what, p.code, w, p.body)
		}
	}
}
