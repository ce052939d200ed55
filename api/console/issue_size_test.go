package console_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// TestConsoleSendStepGuardsTheSize: the preview and the send step say
// the HTML part's size and warn near Gmail's clip; a send over it is
// refused with the reason (409) until "send it anyway" is ticked, and
// the audit names what was forced. (The fake renderer's HTML part is the
// body's length.)
func TestConsoleSendStepGuardsTheSize(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.st.Subscribe(ctx, store.SubscribeRequest{Email: "r@example.com", Topics: []string{"digest"}, Activate: true}); err != nil {
		t.Fatal(err)
	}
	b := e.signedIn(t, editorToken)
	near := url.Values{"subject": {"Near"}, "body": {strings.Repeat("n", issues.WarnBytes+1)}, "topics": {"digest"}}
	mustContain(t, "preview near the clip", b.post("/admin/issues/preview", near), `data-field="html-size">HTML part: 90.0 KB`, "close to the 102.0 KB")

	big := url.Values{"subject": {"Big"}, "body": {strings.Repeat("x", issues.ClipBytes+1)}, "topics": {"digest"}}
	p := b.post("/admin/issues", big)
	m := issueIDRe.FindStringSubmatch(p.location)
	if p.code != 303 || m == nil {
		t.Fatalf("create: %d %q", p.code, p.location)
	}
	path := "/admin/issues/" + m[1]
	mustContain(t, "send step", b.get(path), `data-field="send-size">Its HTML part is <strong>102.0 KB</strong>`, "Gmail clips it",
		`<label for="force">Send it anyway, clipped by Gmail</label>`)
	if p := b.post(path+"/send", url.Values{"when": {"now"}, "audience": {"1"}}); p.code != 409 || !strings.Contains(p.body, "Gmail clips a mail") || !strings.Contains(p.body, "Nothing was sent") {
		t.Fatalf("send of a clipped issue: %d", p.code)
	}
	if is, _ := e.st.Issue(ctx, mustID(t, m[1])); is.Status != store.IssueDraft {
		t.Fatalf("a refused send left the issue %s", is.Status)
	}
	if p := b.post(path+"/send", url.Values{"when": {"now"}, "audience": {"1"}, "force": {"on"}}); p.code != 303 || !strings.HasSuffix(p.location, "done=sending") {
		t.Fatalf("forced send: %d %s", p.code, p.body)
	}
	found := false
	for _, a := range e.audit.entries() {
		found = found || strings.Contains(a.Detail, "forced past: "+issues.OverrideSize)
	}
	if !found {
		t.Fatal(fmt.Sprint("the audit does not name the forced size: ", e.audit.entries()))
	}
}

// TestConsoleWarnsOfTemplateActions: an issue saved with "{{.Name}}" in
// its body is saved as written, and its page says the body is Markdown,
// not a template, and what to do instead.
func TestConsoleWarnsOfTemplateActions(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, editorToken)
	p := b.post("/admin/issues", url.Values{"subject": {"Hi"}, "body": {"Hello {{.Name}},"}, "topics": {"digest"}})
	m := issueIDRe.FindStringSubmatch(p.location)
	if p.code != 303 || m == nil {
		t.Fatalf("create: %d %q", p.code, p.location)
	}
	mustContain(t, "saved issue", b.get(p.location), `data-field="body-warning">Note: the body holds &#34;{{.Name}}&#34;: an issue&#39;s body is Markdown, not a template`, "sequence step")
	if is, _ := e.st.Issue(t.Context(), mustID(t, m[1])); is.Body != "Hello {{.Name}}," {
		t.Fatalf("the body was not saved as written: %q", is.Body)
	}
}
