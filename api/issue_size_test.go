package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// TestIssueSendRefusesAClippedIssue: an issue whose HTML part is over
// Gmail's clip (issues.ClipBytes) is refused (409, its size named) and
// changes nothing; "force" sends it and the answer names what it
// overrode; with nobody to reach, force overrides both refusals. The
// preview says the size, and warns over issues.WarnBytes. (The fake
// renderer's HTML part is the body's length.)
func TestIssueSendRefusesAClippedIssue(t *testing.T) {
	e := newIssueEnv(t)
	big := strings.Repeat("x", issues.ClipBytes+1)
	e.readers(t, 2)
	id := e.create(t, `{"subject":"Big","body":"`+big+`","topics":["digest"]}`)
	p := fmt.Sprintf("/api/issues/%d", id)

	req, _ := http.NewRequest("GET", e.srv.URL+p+"/preview", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.Header.Get("X-Issue-Html-Bytes") != fmt.Sprint(issues.ClipBytes+1) || !strings.Contains(resp.Header.Get("X-Issue-Size-Warning"), "Gmail clips") {
		t.Fatalf("the preview does not say the size: %v", resp.Header)
	}

	before := e.snapshot(t)
	code, out := e.do(t, "POST", p+"/send", `{}`)
	var refusal struct {
		Error     string
		HTMLBytes int `json:"html_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &refusal); err != nil || code != http.StatusConflict ||
		refusal.HTMLBytes != issues.ClipBytes+1 || !strings.Contains(refusal.Error, "102.0 KB") || !strings.Contains(refusal.Error, "force") {
		t.Fatalf("send of a clipped issue: %d %s, want 409 naming its size", code, out)
	}
	if after := e.snapshot(t); after != before {
		t.Fatal("a refused send changed something") // the snapshots hold the body: too long to print
	}
	code, out = e.do(t, "POST", p+"/send", `{"force":true}`)
	if code != http.StatusAccepted || !strings.Contains(out, `"overridden":["size"]`) || !strings.Contains(out, `"audience":2`) {
		t.Fatalf("forced send: %d %s", code, out)
	}
	if is := e.issue(t, id); is.Status != store.IssueSending {
		t.Fatalf("the forced send left the issue %s", is.Status)
	}

	nobody := e.create(t, `{"subject":"Big","body":"`+big+`","topics":["updates"]}`)
	code, out = e.do(t, "POST", fmt.Sprintf("/api/issues/%d/send", nobody), `{"force":true}`)
	if code != http.StatusAccepted || !strings.Contains(out, `"overridden":["no readers","size"]`) {
		t.Fatalf("a forced send to nobody of a clipped issue: %d %s", code, out)
	}
	small := e.create(t, goodIssue)
	code, out = e.do(t, "POST", fmt.Sprintf("/api/issues/%d/send", small), `{}`)
	if code != http.StatusAccepted || !strings.Contains(out, `"overridden":[]`) {
		t.Fatalf("a small issue: %d %s", code, out)
	}
}

// TestSizeWarning: nothing well under the clip; a warning over
// WarnBytes; over ClipBytes, that a send is refused unless forced.
func TestSizeWarning(t *testing.T) {
	if w := issues.SizeWarning(issues.WarnBytes); w != "" {
		t.Errorf("at the warning's threshold: %q", w)
	}
	if w := issues.SizeWarning(issues.WarnBytes + 1); !strings.Contains(w, "close to") {
		t.Errorf("over the warning's threshold: %q", w)
	}
	if w := issues.SizeWarning(issues.ClipBytes + 1); !strings.Contains(w, "refused unless forced") {
		t.Errorf("over the clip: %q", w)
	}
}

// TestIssueSaveWarnsOfTemplateActions: an issue saved with "{{.Name}}"
// in its body is stored as written, and the answer warns that the body
// is Markdown, not a template, and says what to do; a body without one
// has no warning.
func TestIssueSaveWarnsOfTemplateActions(t *testing.T) {
	e := newIssueEnv(t)
	code, out := e.do(t, "POST", "/api/issues", `{"subject":"Hi","body":"Hello {{.Name}},\n\nnews.","topics":["digest"]}`)
	if code != http.StatusCreated || !strings.Contains(out, `"warnings":["the body holds \"{{.Name}}\": an issue's body is Markdown, not a template`) ||
		!strings.Contains(out, "sequence step") {
		t.Fatalf("create: %d %s", code, out)
	}
	var created struct{ ID int64 }
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatal(err)
	}
	p := fmt.Sprintf("/api/issues/%d", created.ID)
	code, out = e.do(t, "PUT", p, `{"subject":"Hi","body":"Hello {{ .Subscriber.Fields.company }}","topics":["digest"]}`)
	if code != http.StatusOK || !strings.Contains(out, `"warnings":[`) || !strings.Contains(out, `"subject":"Hi"`) {
		t.Fatalf("update: %d %s", code, out)
	}
	if is := e.issue(t, created.ID); is.Body != "Hello {{ .Subscriber.Fields.company }}" {
		t.Fatalf("the body was not stored as written: %q", is.Body)
	}
	code, out = e.do(t, "PUT", p, `{"subject":"Hi","body":"Hello, {name} and {{ braces","topics":["digest"]}`)
	if code != http.StatusOK || strings.Contains(out, "warnings") {
		t.Fatalf("a body without an action: %d %s", code, out)
	}
}
