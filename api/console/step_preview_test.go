package console_test

import (
	"context"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// PreviewStep renders a step as its template and topic in a paragraph.
func (f *fakeMail) PreviewStep(_ context.Context, template, topic string) ([]byte, error) {
	return []byte("<p>step " + template + " of " + topic + "</p>"), nil
}

// SendStepTest records a step's test send as "step:TEMPLATE" and the
// addresses.
func (f *fakeMail) SendStepTest(_ context.Context, template, _ string, emails []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tests = append(f.tests, append([]string{"step:" + template}, emails...))
	return nil
}

// TestSequenceStepPreviewAndTestSend: the Sequence screen links each
// saved step's preview; the preview frames the step's mail and offers
// the test send, which goes to one's own and the test lists' addresses
// under the issues' allowance; a stranger's address is a 403, a step
// that is not there a 404, nothing sent.
func TestSequenceStepPreviewAndTestSend(t *testing.T) {
	e := newEnv(t)
	steps := e.catalog.Snapshot().Set.Sequence.Steps
	if len(steps) == 0 {
		t.Fatal("the default sequence has no step")
	}
	v := e.signedIn(t, viewerToken)
	mustContain(t, "the Sequence screen", v.get("/admin/sequence"), `href="/admin/sequence/1/preview"`)
	p := v.get("/admin/sequence/1/preview")
	mustContain(t, "the step's preview", p, "step "+steps[0].Template+" of ")
	if strings.Contains(p.body, `id="step-test"`) {
		t.Fatal("a viewer is offered the test send")
	}
	for _, n := range []string{"0", "99", "x"} {
		if p := v.get("/admin/sequence/" + n + "/preview"); p.code != http.StatusNotFound {
			t.Errorf("step %s: %d, want 404", n, p.code)
		}
	}
	ed := e.signedIn(t, editorToken)
	mustContain(t, "the editor's preview", ed.get("/admin/sequence/1/preview"), `id="step-test"`, `value="me@example.com"`)
	if p := ed.post("/admin/sequence/1/test", url.Values{"emails": {"me@example.com", "stranger@example.net"}}); p.code != http.StatusForbidden || !strings.Contains(p.body, "stranger@example.net") {
		t.Fatalf("a test to a stranger: %d %s", p.code, p.body)
	}
	if p := ed.post("/admin/sequence/99/test", url.Values{"emails": {"me@example.com"}}); p.code != http.StatusNotFound {
		t.Fatalf("a test of no step: %d", p.code)
	}
	if p := ed.post("/admin/sequence/1/test", url.Values{"emails": {"me@example.com"}}); p.code != http.StatusSeeOther || !strings.HasSuffix(p.location, "done=tested") {
		t.Fatalf("a test send: %d %q %s", p.code, p.location, p.body)
	}
	if want := [][]string{{"step:" + steps[0].Template, "me@example.com"}}; !reflect.DeepEqual(e.mail.tests, want) {
		t.Fatalf("test sends %v, want %v", e.mail.tests, want)
	}
	if p := v.post("/admin/sequence/1/test", url.Values{"emails": {"me@example.com"}}); p.code != http.StatusForbidden {
		t.Fatalf("a viewer's test send: %d, want 403", p.code)
	}
}
