package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/presend"
	"github.com/newsletter/newsletter/store"
)

// newCheckedIssueEnv is an issue API whose pre-send checks ask links
// (loopback allowed, as in development), with a site whose /gone answers
// 404.
func newCheckedIssueEnv(t *testing.T) (*issueEnv, *httptest.Server) {
	t.Helper()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gone" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(site.Close)
	ie := &issueEnv{mail: &fakeIssueMail{}}
	ie.env = newEnvWith(t, Config{AdminToken: "s3cret"}, func(d *Deps) {
		ie.st = d.Store.(*store.Redis)
		*d = d.WithIssues(ie.st, ie.mail)
		d.IssueChecker = &issues.Checker{Renderer: ie.mail,
			Checks:        &presend.Checker{Links: presend.NewLinkChecker(netguard.Guard{AllowPrivate: true})},
			PostalAddress: func(context.Context) string { return "" }}
	})
	return ie, site
}

// TestIssueChecksRoute: GET /api/issues/{id}/checks needs a token,
// answers 404 for an unknown issue, and lists each check with its level,
// message and fix: a link that answers 404 an error.
func TestIssueChecksRoute(t *testing.T) {
	e, site := newCheckedIssueEnv(t)
	id := e.create(t, `{"subject":"March","body":"<a href=\"`+site.URL+`/gone\">our page</a> <img src=\"x.png\">","topics":["digest"]}`)
	p := fmt.Sprintf("/api/issues/%d/checks", id)

	resp, err := http.Get(e.srv.URL + p)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", resp.StatusCode)
	}
	if code, out := e.do(t, "GET", "/api/issues/99999/checks", ""); code != http.StatusNotFound {
		t.Fatalf("an unknown issue: %d %s", code, out)
	}
	code, out := e.do(t, "GET", p, "")
	var got struct {
		Checks []map[string]string `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != http.StatusOK {
		t.Fatalf("checks: %d %s", code, out)
	}
	levels := map[string]string{}
	for _, c := range got.Checks {
		if len(c) != 4 || c["message"] == "" || (c["level"] != "ok" && c["fix"] == "") {
			t.Errorf("a check not {check, level, message, fix}: %v", c)
		}
		if levels[c["check"]] == "" || c["level"] == "error" {
			levels[c["check"]] = c["level"]
		}
	}
	want := map[string]string{"size": "ok", "links": "error", "images_alt": "warning", "postal_address": "warning", "spam": "warning"}
	for k, v := range want {
		if levels[k] != v {
			t.Errorf("%s: %q, want %q (%s)", k, levels[k], v, out)
		}
	}
}

// TestIssueSendRefusedByChecks: a send of an issue with an error among
// its checks is refused (409, the failing checks listed) and changes
// nothing; "ignore_checks" sends it, naming the override; warnings
// alone never refuse.
func TestIssueSendRefusedByChecks(t *testing.T) {
	e, site := newCheckedIssueEnv(t)
	e.readers(t, 2)
	id := e.create(t, `{"subject":"March","body":"<a href=\"`+site.URL+`/gone\">our page</a>","topics":["digest"]}`)
	p := fmt.Sprintf("/api/issues/%d/send", id)
	before := e.snapshot(t)
	code, out := e.do(t, "POST", p, `{}`)
	var refusal struct {
		Error  string
		Checks []presend.Result
	}
	if err := json.Unmarshal([]byte(out), &refusal); err != nil || code != http.StatusConflict || len(refusal.Checks) != 1 ||
		refusal.Checks[0].Check != "links" || !strings.Contains(refusal.Error, "ignore_checks") || !strings.Contains(refusal.Error, "/gone") {
		t.Fatalf("send with a broken link: %d %s", code, out)
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("a refused send changed something:\n%s\n%s", before, after)
	}
	if code, out := e.do(t, "POST", p, `{"force":true}`); code != http.StatusConflict {
		t.Fatalf("force does not override the checks: %d %s", code, out)
	}
	code, out = e.do(t, "POST", p, `{"ignore_checks":true}`)
	if code != http.StatusAccepted || !strings.Contains(out, `"overridden":["checks"]`) {
		t.Fatalf("ignore_checks: %d %s", code, out)
	}
	warned := e.create(t, `{"subject":"April","body":"<img src=\"x.png\"> <a href=\"`+site.URL+`/ok\">ok</a>","topics":["digest"]}`)
	code, out = e.do(t, "POST", fmt.Sprintf("/api/issues/%d/send", warned), `{}`)
	if code != http.StatusAccepted || !strings.Contains(out, `"overridden":[]`) {
		t.Fatalf("warnings alone: %d %s", code, out)
	}
}
