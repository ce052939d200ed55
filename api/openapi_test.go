package api

import (
	"context"
	"encoding/json"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/newsletter/newsletter/channels/webhook"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/catalog"
	"github.com/newsletter/newsletter/services/csvimport"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/services/media"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker/catalogmail"
)

const openAPIAdmin = "openapi-admin-token-0123"

// openAPIServer is an API with every optional part on (the role
// matrix's, and the catalog), so every route under /api/ is registered.
func openAPIServer(t *testing.T) *Server {
	t.Helper()
	rdb, _ := redistest.New(t, redistest.DBAPI)
	st := store.NewRedis(rdb)
	client := asynq.NewClientFromRedisClient(rdb)
	jobs := tasks.NewDispatcher(client, st, nil)
	t.Cleanup(jobs.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	live, err := catalog.Open(context.Background(), st, catalog.Options{First: topics.Default(time.Minute), Check: catalogmail.Check, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := live.ImportFirst(context.Background()); err != nil {
		t.Fatal(err)
	}
	deps := Deps{
		Store: st.WithTopics(live), Jobs: jobs, Queue: client, Tasks: asynq.NewInspectorFromRedisClient(rdb),
		Signer: token.NewSigner([]byte("0123456789abcdef"), 0), Log: log, Tokens: st, Accounts: st,
		MetricsHandler: http.NotFoundHandler(), Archive: st,
		Markdown: MarkdownFunc(func(src string) (template.HTML, error) { return template.HTML(template.HTMLEscapeString(src)), nil }),
		Notify:   &webhooks.Notifier{Endpoints: st, Queue: client, Log: log},
		Audit:    audit.NewTrail(st, logredact.New([]byte("openapi-secret")), log, nil), AuditLog: st,
		Imports: csvimport.NewJobs(rdb), ListJobs: listjobs.NewJobs(rdb), SettingsStore: st, Catalog: live, Templates: catalogmail.Builtins{},
		Webhooks: &webhooks.Service{Store: st, Queue: client, NewSecret: webhook.NewSecret},
		Checks:   testChannelChecks(nil),
		Media:    media.New(&media.Dir{Path: t.TempDir(), Base: "http://newsletter.test"}),
	}.WithIssues(st, &fakeIssueMail{})
	return New(Config{AdminToken: openAPIAdmin, VAPIDPublicKey: "BPublicKeyForTheDocs"}, deps)
}

// TestOpenAPIMatchesRoutes: every route under /api/ is in the document
// with a description of its own in apiOps, and everything the document
// or apiOps names is a registered route, with the route's role.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	s := openAPIServer(t)
	doc := s.OpenAPI()
	paths := doc["paths"].(map[string]map[string]any)
	registered := map[string]bool{}
	for _, rt := range s.Routes() {
		method, path, _ := strings.Cut(rt.Pattern, " ")
		if !strings.HasPrefix(path, "/api/") {
			continue
		}
		registered[rt.Pattern] = true
		if _, ok := apiOps[rt.Pattern]; !ok {
			t.Errorf("route %q has no entry in apiOps (openapi_ops.go)", rt.Pattern)
		}
		op, ok := paths[path][strings.ToLower(method)].(map[string]any)
		if !ok {
			t.Errorf("route %q is not in the document", rt.Pattern)
			continue
		}
		if rt.Role != "" && op["x-role"] != string(rt.Role) {
			t.Errorf("%s: x-role %v, the route needs %s", rt.Pattern, op["x-role"], rt.Role)
		}
	}
	for pattern := range apiOps {
		if !registered[pattern] {
			t.Errorf("apiOps describes %q, which no route has", pattern)
		}
	}
	n := 0
	for path, ops := range paths {
		for method := range ops {
			n++
			if !registered[strings.ToUpper(method)+" "+path] {
				t.Errorf("the document has %s %s, which no route has", method, path)
			}
		}
	}
	if n != len(registered) || n < 70 {
		t.Errorf("%d operations documented, %d routes under /api/", n, len(registered))
	}
}

// openAPIDocument fetches GET /api/openapi.json (no token) and parses it
// with libopenapi.
func openAPIDocument(t *testing.T, srv *httptest.Server) (libopenapi.Document, []byte) {
	t.Helper()
	res, err := http.Get(srv.URL + openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %q %.200s", openAPIPath, res.StatusCode, res.Header.Get("Content-Type"), raw)
	}
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		t.Fatal(err)
	}
	return doc, raw
}

// TestOpenAPIValidates: the document served is OpenAPI 3.1 that
// libopenapi-validator finds valid, with the Bearer scheme, and the same
// bytes on every request.
func TestOpenAPIValidates(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(openAPIServer(t))
	t.Cleanup(srv.Close)
	doc, raw := openAPIDocument(t, srv)
	if v := doc.GetSpecInfo().VersionNumeric; v != 3.1 {
		t.Fatalf("OpenAPI version %v, want 3.1", v)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("document: %s (%s)", e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("  at %s: %s", se.FieldPath+" "+se.KeywordLocation, se.Reason)
			}
		}
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	bearer, ok := model.Model.Components.SecuritySchemes.Get("bearerAuth")
	if !ok || bearer.Type != "http" || bearer.Scheme != "bearer" {
		t.Fatalf("securitySchemes.bearerAuth: %+v", bearer)
	}
	_, again := openAPIDocument(t, srv)
	if string(again) != string(raw) {
		t.Error("a second GET answered other bytes")
	}
	var parsed map[string]any
	if err := json.Unmarshal(raw, &parsed); err != nil || parsed["openapi"] != "3.1.0" {
		t.Fatalf("openapi: %v %v", parsed["openapi"], err)
	}
}

// docStep is one request of TestOpenAPIAnswersAsDescribed: path may hold
// {issue}, {segment}, {item}, {webhook}, filled from earlier answers.
type docStep struct {
	method, path, body string
	want               int
	keep               string // the answer's "id" is kept under this name
}

// TestOpenAPIAnswersAsDescribed drives an operation of each resource
// with the admin token and validates each answer (status, content type,
// body) against the document served, with libopenapi-validator.
func TestOpenAPIAnswersAsDescribed(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(openAPIServer(t))
	t.Cleanup(srv.Close)
	doc, _ := openAPIDocument(t, srv)
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	kept := map[string]string{}
	done := map[string]bool{}
	for _, st := range openAPISteps {
		path := st.path
		for k, id := range kept {
			path = strings.ReplaceAll(path, "{"+k+"}", id)
		}
		res, body := docRequest(t, srv, st.method, path, st.body)
		if res.StatusCode != st.want {
			t.Errorf("%s %s: %d, want %d: %s", st.method, path, res.StatusCode, st.want, body)
			continue
		}
		if st.keep != "" {
			var out map[string]any
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatalf("%s %s: %v", st.method, path, err)
			}
			kept[st.keep] = jsonID(out["id"])
		}
		req, err := http.NewRequest(st.method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body = io.NopCloser(strings.NewReader(string(body)))
		if ok, verrs := v.ValidateHttpResponse(req, res); !ok {
			for _, e := range verrs {
				t.Errorf("%s %s (%d): %s: %s", st.method, path, res.StatusCode, e.Message, e.Reason)
				for _, se := range e.SchemaValidationErrors {
					t.Errorf("  at %s: %s", se.FieldPath+" "+se.KeywordLocation, se.Reason)
				}
			}
		}
		done[st.method+" "+st.path] = true
	}
	for _, tag := range []string{"subscribers", "topics", "issues", "events", "settings", "segments", "fields", "webhooks"} {
		if !slices.ContainsFunc(openAPISteps, func(st docStep) bool { return done[st.method+" "+st.path] && strings.Contains(st.path, tagPath(tag)) }) {
			t.Errorf("no answer of %s validated", tag)
		}
	}
}

// tagPath is the path fragment of a tag's routes.
func tagPath(tag string) string {
	if tag == "events" {
		return "/api/events"
	}
	return "/api/" + tag
}

func jsonID(v any) string {
	switch id := v.(type) {
	case string:
		return id
	case float64:
		return strconv.FormatInt(int64(id), 10)
	}
	return ""
}

func docRequest(t *testing.T, srv *httptest.Server, method, path, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+openAPIAdmin)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, out
}

// openAPISteps are the requests TestOpenAPIAnswersAsDescribed makes, in
// order (later ones use what earlier ones made).
var openAPISteps = []docStep{
	{method: "GET", path: openAPIPath, want: 200},
	// subscribers
	{method: "POST", path: "/api/subscribers", body: `{"email":"ada@example.com","name":"Ada","tags":["beta"],"reason":"signed up at the fair"}`, want: 201},
	{method: "GET", path: "/api/subscribers", want: 200},
	{method: "GET", path: "/api/subscribers?q=ada", want: 200},
	{method: "GET", path: "/api/subscribers/ada@example.com", want: 200},
	{method: "GET", path: "/api/subscribers/nobody@example.com", want: 404},
	{method: "PATCH", path: "/api/subscribers/ada@example.com", body: `{"name":"Ada L."}`, want: 200},
	{method: "GET", path: "/api/subscribers/ada@example.com/export", want: 200},
	{method: "GET", path: "/api/subscribers/ada@example.com/devices", want: 200},
	{method: "GET", path: "/api/suppressions", want: 200},
	{method: "GET", path: "/api/stats", want: 200},
	{method: "POST", path: "/api/exports", body: `{}`, want: 202},
	// topics, sequence, templates
	{method: "GET", path: "/api/topics", want: 200},
	{method: "POST", path: "/api/topics", body: `{"id":"launches","name":"Launches","version":1}`, want: 201},
	{method: "GET", path: "/api/topics/launches/growth", want: 200},
	{method: "GET", path: "/api/sequence", want: 200},
	{method: "GET", path: "/api/templates", want: 200},
	// custom fields, tags, segments
	{method: "POST", path: "/api/fields", body: `{"name":"plan","type":"text"}`, want: 200},
	{method: "GET", path: "/api/fields", want: 200},
	{method: "GET", path: "/api/tags", want: 200},
	{method: "POST", path: "/api/segments", body: `{"name":"Beta","expr":"tag:beta"}`, want: 201, keep: "segment"},
	{method: "GET", path: "/api/segments", want: 200},
	{method: "GET", path: "/api/segments/count?expr=tag:beta", want: 200},
	{method: "GET", path: "/api/segments/{segment}", want: 200},
	{method: "PUT", path: "/api/segments/{segment}", body: `{"name":"Beta readers","expr":"tag:beta"}`, want: 200},
	{method: "DELETE", path: "/api/segments/{segment}", want: 204},
	// events, digest items
	{method: "POST", path: "/api/events", body: `{"topic":"updates","title":"Launch","url":"https://example.com/launch"}`, want: 202},
	{method: "POST", path: "/api/items", body: `{"title":"A read","url":"https://example.com/read"}`, want: 201, keep: "item"},
	{method: "PUT", path: "/api/items/{item}", body: `{"title":"A good read","url":"https://example.com/read"}`, want: 200},
	{method: "DELETE", path: "/api/items/{item}", want: 204},
	// issues
	{method: "POST", path: "/api/issues", body: `{"subject":"Hello","body":"Hello {{.Name}}.","topics":["digest"]}`, want: 201, keep: "issue"},
	{method: "GET", path: "/api/issues", want: 200},
	{method: "GET", path: "/api/issues/{issue}", want: 200},
	{method: "PUT", path: "/api/issues/{issue}", body: `{"subject":"Hello again","body":"Hello.","topics":["digest"],"version":1}`, want: 200},
	{method: "GET", path: "/api/issues/{issue}/versions", want: 200},
	{method: "GET", path: "/api/issues/{issue}/audience", want: 200},
	{method: "GET", path: "/api/issues/{issue}/progress", want: 200},
	{method: "GET", path: "/api/issues/{issue}/report", want: 200},
	{method: "GET", path: "/api/issues/{issue}/preview", want: 200},
	{method: "GET", path: "/api/issues/{issue}/preview?format=text", want: 200},
	{method: "GET", path: "/api/issues/{issue}/checks", want: 200},
	{method: "POST", path: "/api/issues/{issue}/duplicate", want: 201, keep: "copy"},
	{method: "DELETE", path: "/api/issues/{copy}", want: 204},
	{method: "GET", path: "/api/issues/999999", want: 404},
	// settings
	{method: "GET", path: "/api/settings", want: 200},
	{method: "PUT", path: "/api/settings", body: `{"name":"The Weekly","from":"The Weekly <weekly@news.example.com>"}`, want: 200},
	// webhooks
	{method: "POST", path: "/api/webhooks", body: `{"url":"https://8.8.8.8/crm","events":["issue.sent"]}`, want: 201, keep: "webhook"},
	{method: "GET", path: "/api/webhooks", want: 200},
	{method: "POST", path: "/api/webhooks/{webhook}/disable", want: 200},
	{method: "POST", path: "/api/webhooks/{webhook}/enable", want: 200},
	{method: "POST", path: "/api/webhooks/{webhook}/test", want: 202},
	{method: "GET", path: "/api/webhooks/{webhook}/deliveries", want: 200},
	{method: "DELETE", path: "/api/webhooks/{webhook}", want: 204},
	// accounts, audit; the subscriber's erasure last
	{method: "GET", path: "/api/accounts", want: 200},
	{method: "GET", path: "/api/audit", want: 200},
	{method: "DELETE", path: "/api/subscribers/ada@example.com", want: 204},
}
