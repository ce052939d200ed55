package api

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/webhook"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/services/csvimport"
	"github.com/newsletter/newsletter/services/media"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// routeRoles is the role of every guarded route (docs/reference.md says
// the same). basic: HTTP Basic auth (a page an operator opens in a
// browser) instead of a Bearer token.
var routeRoles = map[string]struct {
	role  adminauth.Role
	basic bool
}{
	"GET /api/subscribers/{email}":                 {role: adminauth.Viewer},
	"GET /api/subscribers":                         {role: adminauth.Viewer},
	"GET /api/subscribers/{email}/export":          {role: adminauth.Admin},
	"DELETE /api/subscribers/{email}":              {role: adminauth.Admin},
	"POST /api/subscribers":                        {role: adminauth.Admin},
	"PATCH /api/subscribers/{email}":               {role: adminauth.Admin},
	"POST /api/subscribers/bulk":                   {role: adminauth.Admin},
	"GET /api/bulk/{id}":                           {role: adminauth.Admin},
	"POST /api/exports":                            {role: adminauth.Admin},
	"GET /api/exports/{id}":                        {role: adminauth.Admin},
	"POST /api/subscribers/{email}/devices":        {role: adminauth.Editor},
	"GET /api/subscribers/{email}/devices":         {role: adminauth.Editor},
	"DELETE /api/subscribers/{email}/devices/{id}": {role: adminauth.Editor},
	"PUT /api/subscribers/{email}/phone":           {role: adminauth.Editor},
	"DELETE /api/subscribers/{email}/phone":        {role: adminauth.Editor},
	"GET /api/stats":                               {role: adminauth.Viewer},
	"GET /api/topics/{id}/growth":                  {role: adminauth.Viewer},
	"GET /api/suppressions":                        {role: adminauth.Viewer},
	"DELETE /api/suppressions/{email}":             {role: adminauth.Admin},
	"POST /webhooks/bounce":                        {role: adminauth.Admin},
	"POST /api/items":                              {role: adminauth.Editor},
	"PUT /api/items/{id}":                          {role: adminauth.Editor},
	"DELETE /api/items/{id}":                       {role: adminauth.Editor},
	"POST /api/issues/{id}/duplicate":              {role: adminauth.Editor},
	"DELETE /api/issues/{id}":                      {role: adminauth.Editor},
	"POST /api/issues/{id}/restore":                {role: adminauth.Editor},
	"POST /api/media":                              {role: adminauth.Editor},
	"GET /api/issues/{id}/versions":                {role: adminauth.Viewer},
	"POST /api/issues/{id}/versions/{n}/restore":   {role: adminauth.Editor},
	"POST /api/events":                             {role: adminauth.Editor},
	"POST /api/digest/run":                         {role: adminauth.Admin},
	"GET /api/digests/{period}":                    {role: adminauth.Viewer},
	"POST /api/issues":                             {role: adminauth.Editor},
	"GET /api/issues":                              {role: adminauth.Viewer},
	"GET /api/issues/{id}":                         {role: adminauth.Viewer},
	"PUT /api/issues/{id}":                         {role: adminauth.Editor},
	"GET /api/issues/{id}/preview":                 {role: adminauth.Viewer},
	"GET /api/issues/{id}/checks":                  {role: adminauth.Viewer},
	"POST /api/issues/{id}/test":                   {role: adminauth.Editor},
	"POST /api/issues/{id}/send":                   {role: adminauth.Editor},
	"POST /api/issues/{id}/pause":                  {role: adminauth.Editor},
	"POST /api/issues/{id}/reschedule":             {role: adminauth.Editor},
	"POST /api/issues/{id}/unschedule":             {role: adminauth.Editor},
	"GET /api/issues/{id}/audience":                {role: adminauth.Viewer},
	"POST /api/issues/{id}/resume":                 {role: adminauth.Editor},
	"POST /api/issues/{id}/cancel":                 {role: adminauth.Editor},
	"GET /api/issues/{id}/progress":                {role: adminauth.Viewer},
	"GET /api/issues/{id}/report":                  {role: adminauth.Viewer},
	"POST /api/webhooks":                           {role: adminauth.Admin},
	"GET /api/webhooks":                            {role: adminauth.Admin},
	"DELETE /api/webhooks/{id}":                    {role: adminauth.Admin},
	"POST /api/webhooks/{id}/enable":               {role: adminauth.Admin},
	"POST /api/webhooks/{id}/disable":              {role: adminauth.Admin},
	"POST /api/webhooks/{id}/test":                 {role: adminauth.Admin},
	"GET /api/webhooks/{id}/deliveries":            {role: adminauth.Admin},
	"GET /api/audit":                               {role: adminauth.Admin},
	"GET /api/tags":                                {role: adminauth.Viewer},
	"GET /api/fields":                              {role: adminauth.Viewer},
	"POST /api/fields":                             {role: adminauth.Editor},
	"GET /api/segments":                            {role: adminauth.Viewer},
	"GET /api/segments/count":                      {role: adminauth.Viewer},
	"GET /api/segments/{id}":                       {role: adminauth.Viewer},
	"POST /api/segments":                           {role: adminauth.Editor},
	"PUT /api/segments/{id}":                       {role: adminauth.Editor},
	"DELETE /api/segments/{id}":                    {role: adminauth.Editor},
	"GET /api/imports/{id}":                        {role: adminauth.Admin},
	"POST /api/accounts/invites":                   {role: adminauth.Admin},
	"DELETE /api/accounts/invites/{id}":            {role: adminauth.Admin},
	"GET /api/accounts":                            {role: adminauth.Admin},
	"GET /api/settings":                            {role: adminauth.Admin},
	"PUT /api/settings":                            {role: adminauth.Admin},
	"/monitoring/":                                 {role: adminauth.Admin, basic: true},
}

// publicRoutes need no token: the subscriber's pages (their links carry
// signed tokens), probes, the archive, and the providers' signed webhooks.
// The console (/admin/) checks its sessions' roles itself.
var publicRoutes = map[string]bool{
	"GET /{$}": true, "GET /favicon.ico": true, "POST /subscribe": true,
	"GET /confirm": true, "POST /confirm": true, "GET /unsubscribe": true, "POST /unsubscribe": true,
	"GET /preferences": true, "POST /preferences": true, "POST /resubscribe": true, "POST /preferences/fresh": true, "POST /preferences/export": true, "POST /preferences/erase": true,
	"GET /healthz": true, "GET /readyz": true, "GET /metrics": true,
	// the API's description: route shapes, no data (docs/security.md)
	"GET /api/openapi.json": true,
	"GET /archive":          true, "GET /archive/{$}": true, "GET /archive/feed.atom": true, "GET /archive/{slug}": true, "GET /archive/topic/{topic}": true,
	// the images uploaded into issues, which mails link (docs/security.md)
	"GET /media/{name}":      true,
	"POST /preferences/push": true, "GET /sw.js": true, "GET /push.js": true,
	"POST /webhooks/ses": true, "POST /webhooks/sendgrid": true, "POST /webhooks/mailgun": true, "POST /webhooks/postmark": true,
	"/admin/": true,
}

// matrixServer is an API with every optional part on, so that every
// route is registered, and a stored token for each role plus a revoked
// one.
func matrixServer(t *testing.T) (*Server, map[adminauth.Role]string, string) {
	s, _, tokens, revoked := matrixServerStore(t)
	return s, tokens, revoked
}

// matrixServerStore is matrixServer with its store.
func matrixServerStore(t *testing.T) (*Server, *store.Redis, map[adminauth.Role]string, string) {
	t.Helper()
	rdb, _ := redistest.New(t, redistest.DBAPI)
	st := store.NewRedis(rdb)
	client := asynq.NewClientFromRedisClient(rdb)
	jobs := tasks.NewDispatcher(client, st, nil)
	t.Cleanup(jobs.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	deps := Deps{
		Store: st, Jobs: jobs, Queue: client, Tasks: asynq.NewInspectorFromRedisClient(rdb),
		Signer: token.NewSigner([]byte("0123456789abcdef"), 0), Log: log, Tokens: st, Accounts: st,
		MetricsHandler: http.NotFoundHandler(), Archive: st,
		Markdown: MarkdownFunc(func(src string) (template.HTML, error) { return template.HTML(template.HTMLEscapeString(src)), nil }),
		Notify:   &webhooks.Notifier{Endpoints: st, Queue: client, Log: log},
		Audit:    audit.NewTrail(st, logredact.New([]byte("matrix-secret")), log, nil), AuditLog: st,
		Imports: csvimport.NewJobs(rdb), SettingsStore: st,
		Webhooks: &webhooks.Service{Store: st, Queue: client, NewSecret: webhook.NewSecret},
		Checks:   testChannelChecks(nil),
		Media:    media.New(&media.Dir{Path: t.TempDir(), Base: "http://newsletter.test"}),
	}.WithIssues(st, &fakeIssueMail{})
	s := New(Config{AdminToken: "matrix-admin-token-0123", VAPIDPublicKey: "BPublicKeyForTheMatrix"}, deps)
	s.Handle("/monitoring/", s.Monitoring(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), "https://news.example.com"))

	ctx := context.Background()
	tokens := map[adminauth.Role]string{}
	for _, r := range adminauth.Roles {
		tok := adminauth.NewToken()
		if _, err := st.CreateToken(ctx, adminauth.HashToken(tok), adminauth.StoredToken{Name: "matrix-" + string(r), Role: r}); err != nil {
			t.Fatal(err)
		}
		tokens[r] = tok
	}
	revoked := adminauth.NewToken()
	if _, err := st.CreateToken(ctx, adminauth.HashToken(revoked), adminauth.StoredToken{Name: "matrix-revoked", Role: adminauth.Admin}); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeToken(ctx, "matrix-revoked"); err != nil {
		t.Fatal(err)
	}
	return s, st, tokens, revoked
}

// samplePath makes a request path of a route's pattern: each wildcard a
// sample value.
func samplePath(pattern string) (method, path string) {
	method, path, found := strings.Cut(pattern, " ")
	if !found {
		method, path = http.MethodGet, pattern
	}
	path = strings.ReplaceAll(path, "{$}", "")
	for strings.Contains(path, "{") {
		i, j := strings.Index(path, "{"), strings.Index(path, "}")
		sample := "1"
		if strings.Contains(path[i:j], "email") {
			sample = "nobody@example.com"
		}
		path = path[:i] + sample + path[j+1:]
	}
	return method, path
}

// TestRoleMatrix walks every route the API's mux holds: each is public
// (listed in publicRoutes) or guarded with the role routeRoles gives it.
// A guarded one answers no token and a revoked token 401, a role below
// its own 403 (JSON), and lets its role, the roles above it and
// NEWSLETTER_ADMIN_TOKEN through. A route added without a role, or with
// another one, fails here.
func TestRoleMatrix(t *testing.T) {
	s, tokens, revoked := matrixServer(t)
	client := 0
	do := func(method, path, cred string, basic bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		// One client per request: the failure budget is not what is
		// tested here.
		client++
		req.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:4000", client>>16&255, client>>8&255, client&255)
		switch {
		case cred == "":
		case basic:
			req.SetBasicAuth("admin", cred)
		default:
			req.Header.Set("Authorization", "Bearer "+cred)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	routes := s.Routes()
	guarded := 0
	for _, rt := range routes {
		want, listed := routeRoles[rt.Pattern]
		if rt.Role == "" {
			if !publicRoutes[rt.Pattern] {
				t.Errorf("route %q has no role and is not a public one: guard it with s.Viewer, s.Editor or s.Admin, and list it in routeRoles", rt.Pattern)
			}
			continue
		}
		if !listed {
			t.Errorf("route %q (role %s) is not in routeRoles", rt.Pattern, rt.Role)
			continue
		}
		if rt.Role != want.role {
			t.Errorf("route %q needs %s, want %s", rt.Pattern, rt.Role, want.role)
			continue
		}
		guarded++
		method, path := samplePath(rt.Pattern)
		for name, cred := range map[string]string{"no token": "", "a wrong token": "wrong-token-0123456789", "a revoked token": revoked} {
			if rec := do(method, path, cred, want.basic); rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("%s with %s: %d, want 401 with a challenge", rt.Pattern, name, rec.Code)
			}
		}
		for _, have := range adminauth.Roles {
			rec := do(method, path, tokens[have], want.basic)
			if have.Allows(want.role) {
				if rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden || rec.Code == http.StatusTooManyRequests {
					t.Errorf("%s with a %s token: %d %s, want it let through", rt.Pattern, have, rec.Code, rec.Body)
				}
				continue
			}
			var body struct{ Error string }
			if rec.Code != http.StatusForbidden || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error == "" {
				t.Errorf("%s with a %s token: %d %q, want 403 with a JSON error", rt.Pattern, have, rec.Code, rec.Body)
			}
		}
		if rec := do(method, path, "matrix-admin-token-0123", want.basic); rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden {
			t.Errorf("%s with NEWSLETTER_ADMIN_TOKEN: %d", rt.Pattern, rec.Code)
		}
	}
	// The walk saw the routes it should: a server that registered none
	// would pass the loop above.
	if guarded < 20 {
		t.Fatalf("only %d guarded routes walked of %d registered: %v", guarded, len(routes), routes)
	}
	for pattern := range routeRoles {
		if !registered(routes, pattern) {
			t.Logf("routeRoles lists %q, which this API does not register", pattern)
		}
	}
}

func registered(routes []Route, pattern string) bool {
	for _, rt := range routes {
		if rt.Pattern == pattern {
			return true
		}
	}
	return false
}
