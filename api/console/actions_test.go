package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/store"
)

var issueIDRe = regexp.MustCompile(`^/admin/issues/(\d+)\?done=created$`)

// TestIssueFromEditorToSending: an editor writes, previews, saves,
// test-sends, sends, pauses, resumes; each step is the API's and is in
// the audit log.
func TestIssueFromEditorToSending(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, editorToken)
	mustContain(t, "new", b.get("/admin/issues/new"), `<textarea id="body" name="body"`, `value="digest" checked`)

	draft := url.Values{"subject": {"March letter"}, "body": {"Hello **readers** <script>x</script>"}, "topics": {"digest"}}
	// The Preview button (no script): the editor again, the mail framed,
	// nothing saved.
	p := b.post("/admin/issues/preview", draft)
	mustContain(t, "preview", p, `srcdoc="&lt;p&gt;digest: March letter / Hello **readers** &lt;script&gt;`, `value="March letter"`)
	if list, _ := e.st.ListIssues(t.Context(), "", 0, 10); len(list) != 0 {
		t.Fatal("a preview saved the issue")
	}
	// The script's live preview: the mail alone.
	req, _ := http.NewRequest("POST", e.srv.URL+"/admin/issues/preview", strings.NewReader(draft.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Preview", "fragment")
	if p := b.do(req); p.code != 200 || !strings.HasPrefix(p.body, "<p>digest: March letter") {
		t.Fatalf("fragment: %d %q", p.code, p.body)
	}

	// Bad input: the editor again with the API's message, nothing stored.
	bad := url.Values{"subject": {"Bad\r\nsubject"}, "body": {"b"}, "topics": {"digest"}}
	if p := b.post("/admin/issues", bad); p.code != 400 || !strings.Contains(p.body, "subject: one line") {
		t.Fatalf("bad subject: %d", p.code)
	}
	if p := b.post("/admin/issues", url.Values{"subject": {"S"}, "body": {"b"}, "topics": {"nope"}}); p.code != 400 || !strings.Contains(p.body, "unknown topic") {
		t.Fatalf("bad topic: %d", p.code)
	}
	big := url.Values{"subject": {"S"}, "body": {strings.Repeat("a", 512<<10+1)}, "topics": {"digest"}}
	if p := b.post("/admin/issues", big); p.code != 413 {
		t.Fatalf("big body: %d", p.code)
	}

	p = b.post("/admin/issues", draft)
	m := issueIDRe.FindStringSubmatch(p.location)
	if p.code != 303 || m == nil {
		t.Fatalf("create: %d %q", p.code, p.location)
	}
	path := "/admin/issues/" + m[1]
	mustContain(t, "issue", b.get(p.location), "Created.", "March letter", "Test send", "Send the issue")

	draft.Set("subject", "March letter, revised")
	if p := b.post(path, draft); p.code != 303 {
		t.Fatalf("save: %d %s", p.code, p.body)
	}
	if p := b.post(path+"/test", url.Values{"emails": {"me@example.com, you@example.com"}}); p.code != 303 || !strings.HasSuffix(p.location, "done=tested") {
		t.Fatalf("test: %d %q %s", p.code, p.location, p.body)
	}
	if len(e.mail.tests) != 1 || len(e.mail.tests[0]) != 2 {
		t.Fatalf("test sends: %v", e.mail.tests)
	}
	if p := b.post(path+"/test", url.Values{"emails": {strings.Repeat("a@example.com ", 11)}}); p.code != 400 {
		t.Fatalf("11 test addresses: %d", p.code)
	}
	if p := b.post(path+"/send", url.Values{"when": {"at"}, "at": {"2001-01-01T09:00"}}); p.code != 400 || !strings.Contains(p.body, "a time in the future") {
		t.Fatalf("send in the past: %d", p.code)
	}
	if p := b.post(path+"/test", url.Values{"emails": {"me@example.com, stranger@example.net"}}); p.code != 403 || !strings.Contains(p.body, "stranger@example.net") {
		t.Fatalf("test to a stranger: %d %s", p.code, p.body)
	}
	if len(e.mail.tests) != 1 {
		t.Fatalf("a refused test send mailed: %v", e.mail.tests)
	}
	if p := b.post(path+"/send", url.Values{"when": {"now"}, "audience": {"0"}}); p.code != 409 || !strings.Contains(p.body, "0 readers") {
		t.Fatalf("send to nobody: %d %s", p.code, p.body)
	}
	if p := b.post(path+"/send", url.Values{"when": {"now"}, "audience": {"0"}, "force": {"on"}}); p.code != 303 || !strings.HasSuffix(p.location, "done=sending") {
		t.Fatalf("send: %d %s", p.code, p.body)
	}
	if p := b.post(path+"/send", url.Values{"when": {"now"}}); p.code != 409 {
		t.Fatalf("second send: %d", p.code)
	}
	if p := b.post(path, draft); p.code != 409 {
		t.Fatalf("editing a sending issue: %d", p.code)
	}
	page := b.get(path)
	mustContain(t, "sending", page, `data-progress="`+path+`/progress"`, `http-equiv="refresh"`, ">Pause<")
	var prog store.IssueProgress
	req, _ = http.NewRequest("GET", e.srv.URL+path+"/progress", nil)
	req.Header.Set("Accept", "application/json")
	if p := b.do(req); p.code != 200 || json.Unmarshal([]byte(p.body), &prog) != nil || prog.Status != store.IssueSending {
		t.Fatalf("progress: %d %s", p.code, p.body)
	}
	for _, a := range []string{"pause", "resume", "cancel"} {
		if p := b.post(path+"/"+a, nil); p.code != 303 {
			t.Fatalf("%s: %d %s", a, p.code, p.body)
		}
	}
	is, _ := e.st.Issue(t.Context(), mustID(t, m[1]))
	if is.Status != store.IssueCancelled || is.Subject != "March letter, revised" {
		t.Fatalf("issue: %+v", is)
	}
	want := []string{"ed issue.cancelled", "ed issue.resumed", "ed issue.paused", "ed issue.sent", "ed issue.test_sent", "ed issue.updated", "ed issue.created", "ed console.signed_in"}
	if got := e.audit.actions(); strings.Join(got, ";") != strings.Join(want, ";") {
		t.Fatalf("audit:\n%v\nwant\n%v", got, want)
	}
	// A viewer sees the list and the issue, without the editor's forms.
	v := e.signedIn(t, viewerToken)
	mustContain(t, "list", v.get("/admin/issues"), "March letter, revised", "cancelled")
	if p := v.get(path); p.code != 200 || strings.Contains(p.body, "Send the issue") || strings.Contains(p.body, `<textarea`) {
		t.Fatalf("viewer's issue page: %d", p.code)
	}
}

func mustID(t *testing.T, s string) int64 {
	var id int64
	if _, err := fmt.Sscan(s, &id); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestItemsAndSuppressions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.signedIn(t, adminToken)
	if p := b.post("/admin/items", url.Values{"title": {"A post"}, "url": {"javascript:alert(1)"}, "topic": {"digest"}}); p.code != 400 {
		t.Fatalf("bad item: %d", p.code)
	}
	if p := b.post("/admin/items", url.Values{"title": {"A post"}, "url": {"https://example.com/a"}, "topic": {"digest"}}); p.code != 303 {
		t.Fatalf("item: %d %s", p.code, p.body)
	}
	mustContain(t, "items", b.get("/admin/items?topic=digest"), "A post", "https://example.com/a")

	sub := e.subscribe(t, "bob@example.com", "digest")
	if err := e.st.MarkBounced(ctx, sub.Email); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "suppressions", b.get("/admin/suppressions"), "bob@example.com", "bounced")
	if p := b.post("/admin/suppressions/"+itoa(sub.ID)+"/lift", nil); p.code != 303 {
		t.Fatalf("lift: %d %s", p.code, p.body)
	}
	if got, _ := e.st.Get(ctx, sub.Email); got.Status != store.Active {
		t.Fatalf("after the lift: %s", got.Status)
	}
	if p := b.post("/admin/suppressions/"+itoa(sub.ID)+"/lift", nil); p.code != 409 {
		t.Fatalf("a second lift: %d", p.code)
	}
	a := e.audit.actions()
	if a[0] != "alice suppression.lifted" || a[1] != "alice item.added" {
		t.Fatalf("audit: %v", a)
	}
	if tg := e.audit.entries()[0].Target; !strings.HasPrefix(tg, "subscriber:") || strings.Contains(tg, "bob") {
		t.Fatalf("the audit names the address: %q", tg)
	}
}

func TestSubscriberFindTopicsAndUnsubscribe(t *testing.T) {
	e := newEnv(t)
	sub := e.subscribe(t, "cara@example.com", "digest")
	b := e.signedIn(t, adminToken)
	// The address goes in a form body, and the answer names the person
	// by id only.
	p := b.post("/admin/subscribers/find", url.Values{"email": {" Cara@Example.com "}})
	if p.code != 303 || p.location != "/admin/subscribers/"+itoa(sub.ID) {
		t.Fatalf("find: %d %q", p.code, p.location)
	}
	page := b.get(p.location)
	mustContain(t, "subscriber", page, "cara@example.com", "active", "<title>Subscriber "+itoa(sub.ID)+" ")
	// One Topics box: the edit form's (a second form once asked the same).
	if n := strings.Count(page.body, "<legend>Topics</legend>"); n != 1 {
		t.Fatalf("the subscriber's page has %d Topics boxes, want 1", n)
	}
	if p := b.post("/admin/subscribers/find", url.Values{"email": {"nobody@example.com"}}); p.code != 404 || !strings.Contains(p.body, "Nobody with that address") {
		t.Fatalf("unknown: %d", p.code)
	}
	if p := b.post("/admin/subscribers/find", url.Values{"email": {"not an address"}}); p.code != 400 || !strings.Contains(p.body, "not an e-mail address") {
		t.Fatalf("not an address: %d", p.code)
	}
	if p := b.post("/admin/subscribers/"+itoa(sub.ID)+"/topics", url.Values{"topics": {"bogus"}}); p.code != 400 {
		t.Fatalf("bad topic: %d", p.code)
	}
	if p := b.post("/admin/subscribers/"+itoa(sub.ID)+"/topics", url.Values{"topics": {"digest", "updates"}}); p.code != 303 {
		t.Fatalf("topics: %d %s", p.code, p.body)
	}
	if got, _ := e.st.Get(t.Context(), sub.Email); strings.Join(got.Topics, ",") != "digest,updates" {
		t.Fatalf("topics: %v", got.Topics)
	}
	if p := b.post("/admin/subscribers/"+itoa(sub.ID)+"/unsubscribe", nil); p.code != 303 {
		t.Fatalf("unsubscribe: %d", p.code)
	}
	if got, _ := e.st.Get(t.Context(), sub.Email); got.Status != store.Unsubscribed {
		t.Fatalf("status: %s", got.Status)
	}
	// Erasing needs the word typed.
	if p := b.post("/admin/subscribers/"+itoa(sub.ID)+"/erase", nil); p.code != 400 {
		t.Fatalf("erase without confirm: %d", p.code)
	}
}

func upload(t *testing.T, b *browser, name string, content []byte, pending bool) page {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write(content)
	if pending {
		_ = mw.WriteField("pending", "1")
	}
	_ = mw.Close()
	req, _ := http.NewRequest("POST", b.e.srv.URL+"/admin/import", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.do(req)
}
