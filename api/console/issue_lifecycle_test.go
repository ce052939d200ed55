package console_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/store"
)

// TestConsoleScheduledIssue: a scheduled issue's page offers what its
// status allows (send now, reschedule, back to draft, pause, cancel) and
// whom it reaches; pause and resume put it back scheduled for its time;
// a save over a later version is refused with the writer's text kept;
// a refusal names the status.
func TestConsoleScheduledIssue(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	for i := range 2 {
		if _, err := e.st.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("r%d@example.com", i), Topics: []string{"digest"}, Activate: true}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.signedIn(t, editorToken)
	draft := url.Values{"subject": {"April"}, "body": {"first"}, "topics": {"digest"}}
	p := b.post("/admin/issues", draft)
	m := issueIDRe.FindStringSubmatch(p.location)
	if p.code != 303 || m == nil {
		t.Fatalf("create: %d %q", p.code, p.location)
	}
	path := "/admin/issues/" + m[1]
	id := mustID(t, m[1])
	mustContain(t, "draft", b.get(path), "reaches <strong>2</strong> readers", `action="`+path+`/send/review"`, `name="version" value="1"`)

	at := e.clock.Now().Add(3 * time.Hour).UTC().Truncate(time.Minute)
	if p := b.post(path+"/send", url.Values{"when": {"at"}, "at": {at.Format("2006-01-02T15:04")}, "audience": {"2"}, "version": {"1"}}); p.code != 303 || !strings.HasSuffix(p.location, "done=scheduled") {
		t.Fatalf("schedule: %d %s", p.code, p.body)
	}
	page := b.get(path)
	mustContain(t, "scheduled", page, ">Pause<", ">Back to draft<", ">Reschedule<", "Send now or at another time", ">Cancel…<")
	if strings.Contains(page.body, ">Resume<") {
		t.Fatal("a scheduled issue offers Resume")
	}

	// Someone else saves meanwhile: this writer's save of version 1 is
	// refused, their text is on the page to save again.
	if _, err := e.st.UpdateIssue(ctx, id, 1, store.IssueContent{Subject: "April", Body: "theirs", Topics: []string{"digest"}}); err != nil {
		t.Fatal(err)
	}
	mine := url.Values{"subject": {"April"}, "body": {"mine"}, "topics": {"digest"}, "version": {"1"}}
	if p := b.post(path, mine); p.code != 409 || !strings.Contains(p.body, "changed since you opened it") || !strings.Contains(p.body, ">mine</textarea>") || !strings.Contains(p.body, `name="version" value="2"`) {
		t.Fatalf("stale save: %d %s", p.code, p.body)
	}
	if is, _ := e.st.Issue(ctx, id); is.Body != "theirs" {
		t.Fatalf("the stale save wrote %q", is.Body)
	}

	for _, a := range []string{"pause", "resume"} {
		if p := b.post(path+"/"+a, nil); p.code != 303 {
			t.Fatalf("%s: %d %s", a, p.code, p.body)
		}
	}
	if is, _ := e.st.Issue(ctx, id); is.Status != store.IssueScheduled || !is.SendAt.Equal(at) {
		t.Fatalf("after pause and resume: %s at %s, want scheduled at %s", is.Status, is.SendAt, at)
	}
	if p := b.post(path+"/resume", nil); p.code != 409 || !strings.Contains(p.body, "The issue is scheduled") {
		t.Fatalf("resume of a scheduled issue: %d %s", p.code, p.body)
	}
	if p := b.post(path+"/unschedule", nil); p.code != 303 {
		t.Fatalf("unschedule: %d %s", p.code, p.body)
	}
	if is, _ := e.st.Issue(ctx, id); is.Status != store.IssueDraft || !is.SendAt.IsZero() {
		t.Fatalf("after unschedule: %+v", is)
	}
	// A send from a page of version 1: refused, and the page shows the
	// issue as it is now (a save from it must not undo the later edit).
	if p := b.post(path+"/send", url.Values{"when": {"now"}, "audience": {"2"}, "version": {"1"}}); p.code != 409 || !strings.Contains(p.body, "nothing was done") || !strings.Contains(p.body, ">theirs</textarea>") {
		t.Fatalf("send of a stale version: %d %s", p.code, p.body)
	}
	// A damaged form is the writer's to fix (400), not an outage.
	if p := b.post(path+"/send", url.Values{"when": {"now"}, "version": {"x"}}); p.code != 400 {
		t.Fatalf("send with a damaged version: %d", p.code)
	}
	// The audience changed since the page was shown: nothing is sent.
	if p := b.post(path+"/send", url.Values{"when": {"now"}, "audience": {"5"}}); p.code != 409 || !strings.Contains(p.body, "you confirmed 5 readers, it is 2 now") {
		t.Fatalf("send on a changed audience: %d %s", p.code, p.body)
	}
	if is, _ := e.st.Issue(ctx, id); is.Status != store.IssueDraft {
		t.Fatalf("a refused send moved the issue to %s", is.Status)
	}
}
