package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
)

// call makes one request of s with a Bearer token and a JSON body.
func call(s http.Handler, method, path, tok, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

type auditPage struct {
	Entries []audit.Entry
	Next    string
}

// TestAuditLogThroughTheAPI: changes made with an editor's and the
// configured token are recorded with who made them, newest first, in
// pages; a person is named by the keyed hash, never the address.
func TestAuditLogThroughTheAPI(t *testing.T) {
	s, _, tokens, _ := matrixServerStore(t)
	const admin = "matrix-admin-token-0123"
	editor := tokens["editor"]
	if rec := call(s, "POST", "/api/issues", editor, goodIssue); rec.Code != http.StatusCreated {
		t.Fatalf("create an issue: %d %s", rec.Code, rec.Body)
	}
	if rec := call(s, "POST", "/api/events", editor, `{"email":"Reader.One@Example.com","title":"Hi","url":"https://example.com/hi"}`); rec.Code != http.StatusAccepted {
		t.Fatalf("post an event: %d %s", rec.Code, rec.Body)
	}
	if rec := call(s, "POST", "/api/digest/run", admin, `{"period":"2026-W10"}`); rec.Code != http.StatusAccepted {
		t.Fatalf("run a digest: %d %s", rec.Code, rec.Body)
	}
	// A refused change is not recorded.
	if rec := call(s, "POST", "/api/items", editor, `{"title":""}`); rec.Code != http.StatusBadRequest {
		t.Fatalf("a bad item: %d", rec.Code)
	}

	rec := call(s, "GET", "/api/audit?limit=2", admin, "")
	var page auditPage
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &page) != nil || len(page.Entries) != 2 || page.Next == "" {
		t.Fatalf("the first page: %d %s", rec.Code, rec.Body)
	}
	if strings.Contains(strings.ToLower(rec.Body.String()), "reader.one@example.com") {
		t.Fatalf("an address in the audit log: %s", rec.Body)
	}
	run, event := page.Entries[0], page.Entries[1]
	if run.Action != audit.DigestRun || run.Actor != "admin-token" || run.Role != "admin" || run.Target != "digest:2026-W10" || run.At.IsZero() || run.ID == "" {
		t.Fatalf("the digest run's entry: %+v", run)
	}
	wantTarget := audit.Subscriber(logredact.New([]byte("matrix-secret")), "reader.one@example.com")
	if event.Action != audit.EventPosted || event.Actor != "matrix-editor" || event.Role != "editor" || event.Target != wantTarget {
		t.Fatalf("the event's entry: %+v, want target %s", event, wantTarget)
	}
	rec = call(s, "GET", "/api/audit?limit=2&after="+page.Next, admin, "")
	page = auditPage{}
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &page) != nil || len(page.Entries) != 1 || page.Next != "" {
		t.Fatalf("the second page: %d %s", rec.Code, rec.Body)
	}
	if e := page.Entries[0]; e.Action != audit.IssueCreated || e.Actor != "matrix-editor" || !strings.HasPrefix(e.Target, "issue:") {
		t.Fatalf("the issue's entry: %+v", e)
	}
	for _, bad := range []string{"?after=x", "?limit=0", "?limit=501", "?limit=ten"} {
		if rec := call(s, "GET", "/api/audit"+bad, admin, ""); rec.Code != http.StatusBadRequest {
			t.Errorf("GET /api/audit%s: %d, want 400", bad, rec.Code)
		}
	}
}

type failingRecorder struct{}

func (failingRecorder) Record(context.Context, audit.Entry) error {
	return errors.New("redis: connection refused")
}

// TestAuditWriteFailureIsNotSilent: when the entry of a change that was
// made cannot be written, the change still answers as made, and the
// entry is in the service's log (address hashed) and counted.
func TestAuditWriteFailureIsNotSilent(t *testing.T) {
	var logs bytes.Buffer
	redact := logredact.New([]byte("secret"))
	log := slog.New(redact.Handler(slog.NewTextHandler(&logs, nil)))
	reg := prometheus.NewRegistry()
	trail := audit.NewTrail(failingRecorder{}, redact, log, reg)
	e := newEnvWith(t, Config{AdminToken: "audit-admin-token-0123"}, func(d *Deps) { d.Audit = trail })
	req, _ := http.NewRequest("POST", e.srv.URL+"/api/events", strings.NewReader(`{"email":"ann@example.com","title":"Hi","url":"https://example.com/hi"}`))
	req.Header.Set("Authorization", "Bearer audit-admin-token-0123")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close() // only the status is read
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the event with the audit log failing: %d, want 202 (it was queued)", resp.StatusCode)
	}
	want := `
# HELP newsletter_audit_write_failures_total Audit entries that could not be written after their change was made (each is logged at error level).
# TYPE newsletter_audit_write_failures_total counter
newsletter_audit_write_failures_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "newsletter_audit_write_failures_total"); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "action=event.posted") || !strings.Contains(out, "actor=admin-token") ||
		!strings.Contains(out, "target=subscriber:"+redact.Hash("ann@example.com")) || strings.Contains(out, "ann@example.com") {
		t.Fatalf("the log of the failed entry:\n%s", out)
	}
}
