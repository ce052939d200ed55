package console_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/catalog"
	"github.com/newsletter/newsletter/worker/catalogmail"
)

// storedVersion is the catalog's version in Redis (what a refused save
// must leave alone).
func (e *env) storedVersion(t *testing.T) int64 {
	t.Helper()
	c, err := e.st.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c.Version
}

// auditedAs are the details of the audit entries of action, newest first.
func (e *env) auditedAs(action string) []string {
	var out []string
	for _, en := range e.audit.entries() {
		if en.Action == action {
			out = append(out, en.Actor+": "+en.Target+": "+en.Detail)
		}
	}
	return out
}

// signupForm serves the public signup form from another process over the
// same store, with its own catalog that follows the stored one (as the
// API role does).
func signupForm(t *testing.T, e *env) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	live, err := catalog.Open(ctx, e.st, catalog.Options{First: topics.Default(0), Check: catalogmail.Check, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if err := live.ImportFirst(ctx); err != nil {
		t.Fatal(err)
	}
	go live.Watch(ctx, 20*time.Millisecond)
	srv := httptest.NewServer(api.New(api.Config{}, api.Deps{Store: e.st.WithTopics(live), Catalog: live, Templates: catalogmail.Builtins{}, Log: quietLog()}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestTopicsScreen: everyone sees the topics, only an admin changes them.
// A topic added in the console is on the signup form of another process
// without a restart; a bad id, a bad feed line or retiring the digest is
// the form again with the reason and changes nothing; a save over the
// version read after another save says so and changes nothing; every
// save is audited as the API's are.
func TestTopicsScreen(t *testing.T) {
	e := newEnv(t)
	form := signupForm(t, e)
	viewer := e.signedIn(t, viewerToken)
	p := viewer.get("/admin/topics")
	mustContain(t, "the viewer's list", p, `data-topic="digest"`, `data-topic="updates"`, "Weekly digest")
	if strings.Contains(p.body, `id="topic-add"`) || strings.Contains(p.body, "/retire") {
		t.Fatalf("a viewer is offered the admin's forms:\n%s", p.body)
	}
	add := url.Values{"version": {"1"}, "id": {"launches"}, "name": {"Launches"}, "description": {"A note when we ship."}, "archive": {"on"}, "public": {"on"}}
	if p := viewer.post("/admin/topics", add); p.code != http.StatusForbidden {
		t.Fatalf("a viewer adds a topic: %d", p.code)
	}
	if p := e.signedIn(t, editorToken).post("/admin/topics", add); p.code != http.StatusForbidden {
		t.Fatalf("an editor adds a topic: %d", p.code)
	}

	admin := e.signedIn(t, adminToken)
	for name, c := range map[string]struct {
		field, value, reason string
	}{
		"an id with capitals":    {"id", "Launches", "use 1 to 32 lower-case letters"},
		"an id with an accent":   {"id", "café", "use 1 to 32 lower-case letters"},
		"no name":                {"name", "", "missing name"},
		"a feed that is no URL":  {"feeds", "feed.xml", "want an absolute http(s) URL"},
		"a feed line of 4 words": {"feeds", "https://example.com/f.xml each 3 more", "feeds, line 1"},
	} {
		bad := url.Values{}
		for k, v := range add {
			bad[k] = v
		}
		bad.Set(c.field, c.value)
		p := admin.post("/admin/topics", bad)
		if p.code != http.StatusBadRequest || !strings.Contains(html.UnescapeString(p.body), c.reason) {
			t.Errorf("%s: %d, want 400 saying %q:\n%s", name, p.code, c.reason, p.body)
		}
		if c.value != "" && !strings.Contains(html.UnescapeString(p.body), c.value) {
			t.Errorf("%s: what was typed (%q) is not in the form again", name, c.value)
		}
	}
	if v := e.storedVersion(t); v != 1 || len(e.catalog.Current().Topics) != 2 {
		t.Fatalf("refused topics changed the catalog: version %d, %d topics", v, len(e.catalog.Current().Topics))
	}

	if p := admin.post("/admin/topics", add); p.code != http.StatusSeeOther || p.location != "/admin/topics?done=topic-added" {
		t.Fatalf("add: %d %q\n%s", p.code, p.location, p.body)
	}
	if got, ok := e.catalog.Current().Topic("launches"); !ok || got.Name != "Launches" || got.Private || got.Assigned {
		t.Fatalf("in effect here: %+v %v", got, ok)
	}
	poll.Until(t, poll.BusyMachine, func() error {
		_, body := getPage(t, form+"/")
		if !strings.Contains(body, `value="launches"`) || !strings.Contains(body, "Launches") {
			return fmt.Errorf("the signup form has no Launches yet:\n%s", body)
		}
		return nil
	})
	if got := e.auditedAs(audit.TopicsChanged); len(got) != 1 || got[0] != "alice: topics: added launches (version 2)" {
		t.Fatalf("audit: %q", got)
	}
	if p := admin.post("/admin/topics", add); p.code != http.StatusConflict || !strings.Contains(p.body, "Changed since you read it") {
		t.Fatalf("the same form again, read at version 1: %d\n%s", p.code, p.body)
	}

	// Its page: rename it, a feed of its own, out of the archive.
	mustContain(t, "the topic's page", admin.get("/admin/topics/launches"), `name="version" value="2"`, `value="Launches"`, `id="retired"`)
	edit := url.Values{"version": {"2"}, "name": {"Product launches"}, "description": {"When we ship."}, "feeds": {"https://example.com/releases.xml each 3\r\n"}}
	if p := admin.post("/admin/topics/launches", edit); p.code != http.StatusSeeOther {
		t.Fatalf("save: %d\n%s", p.code, p.body)
	}
	got, _ := e.catalog.Current().Topic("launches")
	if got.Name != "Product launches" || !got.Private || len(got.Feeds) != 1 || got.Feeds[0].Mode != topics.FeedEach || got.Feeds[0].MaxPerDay != 3 {
		t.Fatalf("saved: %+v", got)
	}
	// The same page saved again: read at version 2, now 3.
	edit.Set("name", "Late rename")
	p = admin.post("/admin/topics/launches", edit)
	if p.code != http.StatusConflict || !strings.Contains(p.body, "Changed since you read it") || !strings.Contains(p.body, `value="Late rename"`) ||
		!strings.Contains(p.body, `name="version" value="3"`) {
		t.Fatalf("a stale save: %d\n%s", p.code, p.body)
	}
	if got, _ := e.catalog.Current().Topic("launches"); got.Name != "Product launches" {
		t.Fatalf("a stale save renamed it: %+v", got)
	}
	if p := viewer.get("/admin/topics/launches"); !strings.Contains(p.body, "<fieldset disabled>") || strings.Contains(p.body, `>Save</button>`) {
		t.Fatalf("a viewer's topic page is not read-only:\n%s", p.body)
	}

	// Retire it and offer it again; the digest cannot be retired.
	if p := admin.post("/admin/topics/launches/retire", url.Values{"version": {"3"}}); p.code != http.StatusSeeOther {
		t.Fatalf("retire: %d\n%s", p.code, p.body)
	}
	if got, _ := e.catalog.Current().Topic("launches"); !got.Retired {
		t.Fatalf("not retired: %+v", got)
	}
	if p := admin.post("/admin/topics/digest/retire", url.Values{"version": {"4"}}); p.code != http.StatusBadRequest || !strings.Contains(p.body, "cannot be retired") {
		t.Fatalf("retire the digest: %d\n%s", p.code, p.body)
	}
	if p := admin.post("/admin/topics/launches/unretire", url.Values{"version": {"4"}}); p.code != http.StatusSeeOther {
		t.Fatalf("unretire: %d\n%s", p.code, p.body)
	}
	if got, _ := e.catalog.Current().Topic("launches"); got.Retired || e.storedVersion(t) != 5 {
		t.Fatalf("offered again: %+v at version %d", got, e.storedVersion(t))
	}
	if p := admin.post("/admin/topics/nope/retire", url.Values{"version": {"5"}}); p.code != http.StatusNotFound {
		t.Fatalf("an unknown topic: %d", p.code)
	}
	if n := len(e.auditedAs(audit.TopicsChanged)); n != 4 {
		t.Fatalf("audit: %d topics entries, want 4 (added, changed, retired, changed)", n)
	} // A topic the product assigns: "Offered on the public signup form"
	// unticked; its page shows the box unticked, the list says so.
	insiders := url.Values{"version": {"5"}, "id": {"insiders"}, "name": {"Insiders"}, "archive": {"on"}}
	if p := admin.post("/admin/topics", insiders); p.code != http.StatusSeeOther {
		t.Fatalf("add a non-public topic: %d\n%s", p.code, p.body)
	}
	if got, ok := e.catalog.Current().Topic("insiders"); !ok || !got.Assigned {
		t.Fatalf("the non-public topic in effect: %+v %v", got, ok)
	}
	if p := admin.get("/admin/topics/insiders"); !strings.Contains(p.body, `id="public" name="public" value="on">`) {
		t.Fatalf("the topic's page does not show it non-public:\n%s", p.body)
	}
	if p := admin.get("/admin/topics"); !strings.Contains(p.body, `<td>assigned</td>`) {
		t.Fatalf("the list does not say the topic is assigned:\n%s", p.body)
	}
}

// TestSequenceScreen: an admin adds a step written in the console
// (subject and Markdown), edits it and removes it, each over the version
// read; a delay that is no duration, a body naming a field mails do not
// have and a save from an old page are refused with the reason and
// change nothing; a viewer sees the form but cannot save.
func TestSequenceScreen(t *testing.T) {
	e := newEnv(t)
	admin := e.signedIn(t, adminToken)
	mustContain(t, "the sequence", admin.get("/admin/sequence"), `id="step-0-template"`, `value="welcome"`, `id="step-new-body"`, `<option value="digest" selected>`)
	seq := func(version string, rows ...[4]string) url.Values {
		v := url.Values{"version": {version}, "topic": {"digest"}}
		for _, r := range rows {
			v.Add("template", r[0])
			v.Add("after", r[1])
			v.Add("subject", r[2])
			v.Add("body", r[3])
		}
		return v
	}
	welcome := [4]string{"welcome", "0s", "", ""}
	empty := [4]string{}
	for name, c := range map[string]struct {
		step   [4]string
		reason string
	}{
		"a delay in days":    {[4]string{"tips", "3 days", "Tips", "Hello"}, "want a duration such as 5m or 72h"},
		"an unknown field":   {[4]string{"tips", "72h", "Tips", "Hello {{.Nope}}"}, `template tips, text part, line 1: "Nope" is not a field you can use here`},
		"no template at all": {[4]string{"tips", "72h", "", ""}, "give the step a subject and a body"},
		"a reserved name":    {[4]string{"confirm", "72h", "S", "B"}, "another mail"},
	} {
		p := admin.post("/admin/sequence", seq("1", welcome, c.step))
		if p.code != http.StatusBadRequest || !strings.Contains(html.UnescapeString(p.body), c.reason) {
			t.Errorf("%s: %d, want 400 saying %q:\n%s", name, p.code, c.reason, p.body)
		}
	}
	if v := e.storedVersion(t); v != 1 {
		t.Fatalf("refused sequences moved the version to %d", v)
	}

	tips := [4]string{"tips", "72h", "Three tips", "# Tips\r\n\r\nHello {{.Email}}, read **this**."}
	if p := admin.post("/admin/sequence", seq("1", welcome, tips, empty)); p.code != http.StatusSeeOther || p.location != "/admin/sequence?done=sequence-saved" {
		t.Fatalf("add a step: %d %q\n%s", p.code, p.location, p.body)
	}
	steps := e.catalog.Current().Sequence.Steps
	if len(steps) != 2 || steps[1].Template != "tips" || steps[1].After != 72*time.Hour || steps[1].Subject != "Three tips" ||
		steps[1].Body != "# Tips\n\nHello {{.Email}}, read **this**." {
		t.Fatalf("the sequence in effect: %+v", steps)
	}
	if got := e.auditedAs(audit.SequenceChanged); len(got) != 1 || got[0] != "alice: sequence: 2 steps (version 2)" {
		t.Fatalf("audit: %q", got)
	}
	mustContain(t, "the saved sequence", admin.get("/admin/sequence"), `id="step-1-after" name="after" type="text" maxlength="20" size="8" value="72h"`, "Three tips")
	if p := admin.post("/admin/sequence", seq("1", welcome, [4]string{"tips", "96h", "Later tips", "Hi"})); p.code != http.StatusConflict ||
		!strings.Contains(p.body, "Changed since you read it") || !strings.Contains(p.body, "Later tips") {
		t.Fatalf("a save from the first page: %d\n%s", p.code, p.body)
	}

	viewer := e.signedIn(t, viewerToken)
	if p := viewer.get("/admin/sequence"); p.code != http.StatusOK || !strings.Contains(p.body, "<fieldset disabled>") || strings.Contains(p.body, "step-new") {
		t.Fatalf("the viewer's sequence: %d\n%s", p.code, p.body)
	}
	if p := viewer.post("/admin/sequence", seq("2", welcome)); p.code != http.StatusForbidden {
		t.Fatalf("a viewer saves the sequence: %d", p.code)
	}

	// Remove the step: its box ticked.
	remove := seq("2", welcome, tips, empty)
	remove.Set("remove", "1")
	if p := admin.post("/admin/sequence", remove); p.code != http.StatusSeeOther {
		t.Fatalf("remove a step: %d\n%s", p.code, p.body)
	}
	if steps := e.catalog.Current().Sequence.Steps; len(steps) != 1 || steps[0].Template != "welcome" || e.storedVersion(t) != 3 {
		t.Fatalf("after the removal: %+v", steps)
	}
}

// TestMailTemplatesScreen: the list names the built-in templates and the
// steps; a template's page shows the built-in text until one is saved; a
// text with an unknown field or one that does not parse is the form
// again with the reason, nothing saved; a save is versioned, in the
// history with who saved it, audited as the API's; an old page's save
// is refused; a viewer and an editor read but cannot save.
func TestMailTemplatesScreen(t *testing.T) {
	e := newEnv(t)
	admin := e.signedIn(t, adminToken)
	mustContain(t, "the list", admin.get("/admin/templates"), `data-template="welcome"`, `data-template="layout"`, `data-template="confirm"`)
	mustContain(t, "the built-in welcome", admin.get("/admin/templates/welcome"), "thank you for confirming", `name="version" value="0"`, "None saved")
	if p := admin.get("/admin/templates/nope"); p.code != http.StatusNotFound {
		t.Fatalf("an unknown template: %d", p.code)
	}
	for name, c := range map[string]struct{ text, reason string }{
		"an unknown field": {`{{define "subject"}}Hi{{end}}Hello {{.Nope}}`, `template welcome, text part, line 1: "Nope" is not a field you can use here; fields: .Email, .Name,`},
		"does not parse":   {`{{define "subject"}}Hi{{end}}{{if}}`, "template welcome, text part, line 1: {{if}} needs a value, such as {{if .Name}}"},
		"no subject":       {`Hello`, `no {{define "subject"}}`},
	} {
		p := admin.post("/admin/templates/welcome", url.Values{"version": {"0"}, "text": {c.text}})
		if p.code != http.StatusBadRequest || !strings.Contains(html.UnescapeString(p.body), c.reason) || !strings.Contains(html.UnescapeString(p.body), c.text) {
			t.Errorf("%s: %d, want 400 saying %q with the text again:\n%s", name, p.code, c.reason, p.body)
		}
	}
	if c, err := e.st.Catalog(context.Background()); err != nil || len(c.Templates) != 0 {
		t.Fatalf("refused templates were stored: %+v %v", c.Templates, err)
	}
	for _, tok := range []string{viewerToken, editorToken} {
		if p := e.signedIn(t, tok).post("/admin/templates/welcome", url.Values{"version": {"0"}, "text": {`{{define "subject"}}Hi{{end}}Hi`}}); p.code != http.StatusForbidden {
			t.Fatalf("%s saves a template: %d", tok, p.code)
		}
	}

	text := "{{define \"subject\"}}Hello from {{.Newsletter.Name}}{{end}}Hello {{.Email}}\r\n"
	if p := admin.post("/admin/templates/welcome", url.Values{"version": {"0"}, "text": {text}}); p.code != http.StatusSeeOther ||
		p.location != "/admin/templates/welcome?done=template-saved" {
		t.Fatalf("save: %d %q\n%s", p.code, p.location, p.body)
	}
	stored := e.catalog.Snapshot().Templates["welcome"]
	if stored.Version != 1 || stored.Text != strings.ReplaceAll(text, "\r\n", "\n") {
		t.Fatalf("in effect: %+v", stored)
	}
	if got := e.auditedAs(audit.TemplateChanged); len(got) != 1 || got[0] != "alice: template:welcome: version 1" {
		t.Fatalf("audit: %q", got)
	}
	p := admin.get("/admin/templates/welcome")
	mustContain(t, "the saved welcome", p, "Hello from", `name="version" value="1"`, "<td>alice</td>", `href="/admin/templates/welcome?version=1"`)
	if p := admin.post("/admin/templates/welcome", url.Values{"version": {"0"}, "text": {`{{define "subject"}}Again{{end}}Again`}}); p.code != http.StatusConflict ||
		!strings.Contains(p.body, "someone saved this template") || !strings.Contains(p.body, `name="version" value="1"`) {
		t.Fatalf("a save from the first page: %d\n%s", p.code, p.body)
	}
	mustContain(t, "the list after a save", admin.get("/admin/templates"), "your own, version 1")
	if p := admin.get("/admin/templates/welcome?version=7"); p.code != http.StatusNotFound {
		t.Fatalf("a version not kept: %d", p.code)
	}
	if p := e.signedIn(t, viewerToken).get("/admin/templates/welcome"); p.code != http.StatusOK || !strings.Contains(p.body, "<fieldset disabled>") {
		t.Fatalf("the viewer's page: %d\n%s", p.code, p.body)
	}
}

// getPage reads a public page.
func getPage(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
