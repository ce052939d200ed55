package console_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// TestConsoleIssueSlug: a saved issue's editor has its slug; a save
// moves it to a free one, a taken one keeps the writer's text with the
// reason (409), a malformed one says the form (400).
func TestConsoleIssueSlug(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.st.CreateIssue(ctx, store.IssueContent{Subject: "Taken", Body: "x", Topics: []string{"digest"}}, ""); err != nil {
		t.Fatal(err)
	}
	b := e.signedIn(t, editorToken)
	p := b.post("/admin/issues", url.Values{"subject": {"April"}, "body": {"first"}, "topics": {"digest"}})
	m := issueIDRe.FindStringSubmatch(p.location)
	if p.code != 303 || m == nil {
		t.Fatalf("create: %d %q", p.code, p.location)
	}
	path := "/admin/issues/" + m[1]
	id := mustID(t, m[1])
	mustContain(t, "editor", b.get(path), `name="slug"`, `value="april"`)

	save := func(slug, body string) page {
		is, err := e.st.Issue(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return b.post(path, url.Values{"subject": {"April"}, "body": {body}, "topics": {"digest"}, "slug": {slug}, "version": {itoa(int64(is.Version))}})
	}
	if p := save("taken", "mine"); p.code != 409 || !strings.Contains(p.body, "another issue has the slug") || !strings.Contains(p.body, ">mine</textarea>") {
		t.Fatalf("a taken slug: %d %s", p.code, p.body)
	}
	if p := save("Not A Slug", "mine"); p.code != 400 || !strings.Contains(p.body, "lower-case letters, digits and hyphens") {
		t.Fatalf("a malformed slug: %d %s", p.code, p.body)
	}
	if is, _ := e.st.Issue(ctx, id); is.Slug != "april" || is.Body != "first" {
		t.Fatalf("a refused save changed the issue: %+v", is)
	}
	if p := save("april-letter", "second"); p.code != 303 {
		t.Fatalf("save: %d %s", p.code, p.body)
	}
	if is, _ := e.st.IssueBySlug(ctx, "april-letter"); is.ID != id || is.Body != "second" {
		t.Fatalf("after the save: %+v", is)
	}
}
