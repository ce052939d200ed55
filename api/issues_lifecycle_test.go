package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// readers makes n active readers of the digest topic.
func (e *issueEnv) readers(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		if _, err := e.st.Subscribe(context.Background(), store.SubscribeRequest{Email: fmt.Sprintf("r%d@example.com", i),
			Topics: []string{"digest"}, Activate: true}); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *issueEnv) issue(t *testing.T, id int64) store.Issue {
	t.Helper()
	is, err := e.st.Issue(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return is
}

// TestIssueStaleEditIsRefused: two editors opened version 1; the second
// save is 409 "changed since you opened it" and the first one's text is
// what the issue holds (and what a send then sends).
func TestIssueStaleEditIsRefused(t *testing.T) {
	e := newIssueEnv(t)
	id := e.create(t, goodIssue)
	p := fmt.Sprintf("/api/issues/%d", id)
	if code, out := e.do(t, "PUT", p, `{"subject":"March","body":"first","topics":["digest"],"version":1}`); code != 200 {
		t.Fatalf("first save: %d %s", code, out)
	}
	code, out := e.do(t, "PUT", p, `{"subject":"March","body":"second","topics":["digest"],"version":1}`)
	if code != http.StatusConflict || !strings.Contains(out, "changed since you opened it") {
		t.Fatalf("stale save: %d %s, want 409 changed since you opened it", code, out)
	}
	if is := e.issue(t, id); is.Body != "first" || is.Version != 2 {
		t.Fatalf("after the stale save: %q v%d, want first v2", is.Body, is.Version)
	}
	// A send confirmed on version 1 is refused too: the publisher saw
	// another text.
	e.readers(t, 1)
	if code, out := e.do(t, "POST", p+"/send", `{"version":1}`); code != http.StatusConflict {
		t.Fatalf("send of a stale version: %d %s", code, out)
	}
	if is := e.issue(t, id); is.Status != store.IssueDraft {
		t.Fatalf("a refused send moved the issue to %s", is.Status)
	}
}

// TestIssueSendCountsItsAudience: the send answers whom it reaches; a
// confirmed audience that changed, and a send to nobody, are refused
// (409) and change nothing; force sends to nobody.
func TestIssueSendCountsItsAudience(t *testing.T) {
	e := newIssueEnv(t)
	empty := e.create(t, `{"subject":"Nobody","body":"x","topics":["updates"]}`)
	code, out := e.do(t, "POST", fmt.Sprintf("/api/issues/%d/send", empty), `{}`)
	if code != http.StatusConflict || !strings.Contains(out, "0 readers") {
		t.Fatalf("send to nobody: %d %s, want 409", code, out)
	}
	if is := e.issue(t, empty); is.Status != store.IssueDraft {
		t.Fatalf("a refused send moved the issue to %s", is.Status)
	}
	e.readers(t, 3)
	id := e.create(t, goodIssue)
	p := fmt.Sprintf("/api/issues/%d", id)
	if code, out := e.do(t, "GET", p+"/audience", ""); code != 200 || !strings.Contains(out, `"audience":3`) {
		t.Fatalf("audience: %d %s", code, out)
	}
	if code, out := e.do(t, "POST", p+"/send", `{"confirm_audience":2}`); code != http.StatusConflict || !strings.Contains(out, `"audience":3`) {
		t.Fatalf("send on a changed audience: %d %s, want 409 naming 3", code, out)
	}
	if is := e.issue(t, id); is.Status != store.IssueDraft {
		t.Fatalf("a refused send moved the issue to %s", is.Status)
	}
	code, out = e.do(t, "POST", p+"/send", `{"confirm_audience":3}`)
	var got struct {
		ID       int64
		Status   string
		Audience int64
	}
	if code != http.StatusAccepted || json.Unmarshal([]byte(out), &got) != nil || got.Audience != 3 || got.Status != store.IssueSending {
		t.Fatalf("send: %d %s", code, out)
	}
	if code, out := e.do(t, "POST", fmt.Sprintf("/api/issues/%d/send", empty), `{"force":true}`); code != http.StatusAccepted || !strings.Contains(out, `"audience":0`) {
		t.Fatalf("forced send to nobody: %d %s", code, out)
	}
}

// TestIssuePauseResumeKeepsTheSchedule: a scheduled issue paused and
// resumed is scheduled again for its time (not sent at once), with a
// plan of a new round due then; reschedule moves the time, unschedule
// makes it a draft again, and a scheduled issue can be sent now.
func TestIssuePauseResumeKeepsTheSchedule(t *testing.T) {
	e := newIssueEnv(t)
	e.readers(t, 1)
	id := e.create(t, goodIssue)
	p := fmt.Sprintf("/api/issues/%d", id)
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	if code, out := e.do(t, "POST", p+"/send", `{"at":"`+at.Format(time.RFC3339)+`"}`); code != http.StatusAccepted {
		t.Fatalf("send at: %d %s", code, out)
	}
	for _, a := range []string{"pause", "resume"} {
		if code, out := e.do(t, "POST", p+"/"+a, ""); code != 200 {
			t.Fatalf("%s: %d %s", a, code, out)
		}
	}
	is := e.issue(t, id)
	if is.Status != store.IssueScheduled || !is.SendAt.Equal(at) || is.Round != 2 {
		t.Fatalf("after pause and resume: %s at %v round %d, want scheduled at %v round 2", is.Status, is.SendAt, is.Round, at)
	}
	info, err := e.insp.GetTaskInfo(tasks.QueueCritical, tasks.IssuePlanTaskID(id, 2))
	if err != nil || !info.NextProcessAt.Equal(at) {
		t.Fatalf("the resumed plan: %+v %v, want due %v", info, err, at)
	}
	later := at.Add(time.Hour)
	if code, out := e.do(t, "POST", p+"/reschedule", `{"at":"`+later.Format(time.RFC3339)+`"}`); code != 200 {
		t.Fatalf("reschedule: %d %s", code, out)
	}
	if is := e.issue(t, id); is.Status != store.IssueScheduled || !is.SendAt.Equal(later) || is.Round != 3 {
		t.Fatalf("after reschedule: %+v", is)
	}
	if code, out := e.do(t, "POST", p+"/unschedule", ""); code != 200 {
		t.Fatalf("unschedule: %d %s", code, out)
	}
	if is := e.issue(t, id); is.Status != store.IssueDraft || !is.SendAt.IsZero() {
		t.Fatalf("after unschedule: %+v", is)
	}
	// A draft cannot be resumed, rescheduled or unscheduled; each
	// refusal names the status.
	for _, a := range []string{"resume", "unschedule"} {
		if code, out := e.do(t, "POST", p+"/"+a, ""); code != http.StatusConflict || !strings.Contains(out, "is draft") {
			t.Errorf("%s of a draft: %d %s, want 409 naming draft", a, code, out)
		}
	}
	if code, out := e.do(t, "POST", p+"/send", `{"at":"`+at.Format(time.RFC3339)+`"}`); code != http.StatusAccepted {
		t.Fatalf("schedule again: %d %s", code, out)
	}
	if code, out := e.do(t, "POST", p+"/send", `{}`); code != http.StatusAccepted || !strings.Contains(out, `"status":"sending"`) {
		t.Fatalf("send a scheduled issue now: %d %s", code, out)
	}
}

// TestIssueTestSendGoesOnlyToOwnAddresses: a test send to an address
// that is neither the account's nor a test recipient is 403 and mails
// nobody; the allowance is a few a minute (429).
func TestIssueTestSendGoesOnlyToOwnAddresses(t *testing.T) {
	e := newIssueEnv(t)
	id := e.create(t, goodIssue)
	p := fmt.Sprintf("/api/issues/%d/test", id)
	if code, out := e.do(t, "POST", p, `{"emails":["stranger@example.net"]}`); code != http.StatusForbidden {
		t.Fatalf("test to a stranger: %d %s, want 403", code, out)
	}
	if len(e.mail.tests) != 0 {
		t.Fatalf("a refused test send mailed %v", e.mail.tests)
	}

	ie := &issueEnv{mail: &fakeIssueMail{}}
	ie.env = newEnvWith(t, Config{AdminToken: "s3cret"}, func(d *Deps) {
		ie.st = d.Store.(*store.Redis)
		*d = d.WithIssues(ie.st, ie.mail)
		d.TestGate = &issues.TestGate{Recipients: []string{"me@example.com"}}
	})
	p = fmt.Sprintf("/api/issues/%d/test", ie.create(t, goodIssue))
	for i := range issues.DefaultTestSendsPerMinute {
		if code, out := ie.do(t, "POST", p, `{"emails":["me@example.com","ME@Example.com"]}`); code != 200 || !strings.Contains(out, `"sent":1`) {
			t.Fatalf("test send %d to a test recipient: %d %s, want 200, one address", i+1, code, out)
		}
	}
	if code, out := ie.do(t, "POST", p, `{"emails":["me@example.com"]}`); code != http.StatusTooManyRequests {
		t.Fatalf("test send over the allowance: %d %s, want 429", code, out)
	}
	if len(ie.mail.tests) != issues.DefaultTestSendsPerMinute {
		t.Fatalf("%d test sends mailed, want %d", len(ie.mail.tests), issues.DefaultTestSendsPerMinute)
	}
}

// TestIssueBodyOverCapIs413BeforeContinue: an issue declaring a body over
// its cap is answered 413 before any 100 Continue, chunked too.
func TestIssueBodyOverCapIs413BeforeContinue(t *testing.T) {
	e := newIssueEnv(t)
	const big = 2 << 20
	if code := expectContinue(t, e.srv.Listener.Addr().String(), "/api/issues", "application/json", big, "Authorization: Bearer s3cret"); code != http.StatusRequestEntityTooLarge {
		t.Errorf("POST /api/issues declaring %d bytes: first answer %d, want 413", big, code)
	}
	if code := chunked(t, e.srv.URL+"/api/issues", "application/json", "body", big, "Authorization: Bearer s3cret"); code != http.StatusRequestEntityTooLarge {
		t.Errorf("POST /api/issues chunked %d bytes: %d, want 413", big, code)
	}
}

// TestIssuePathologicalMarkdownIsRefused: a body whose rendering would
// not be linear in its size (200 KB of "[a](") is a 400 naming the line,
// and nothing is stored.
func TestIssuePathologicalMarkdownIsRefused(t *testing.T) {
	e := newIssueEnv(t)
	body, _ := json.Marshal(map[string]any{"subject": "S", "body": strings.Repeat("[a](", 50000), "topics": []string{"digest"}})
	code, out := e.do(t, "POST", "/api/issues", string(body))
	if code != http.StatusBadRequest || !strings.Contains(out, "too complex") || !strings.Contains(out, "line 1") {
		t.Fatalf("pathological body: %d %.200s, want 400 naming line 1", code, out)
	}
	if list, _ := e.st.ListIssues(context.Background(), "", 0, 10); len(list) != 0 {
		t.Fatalf("a refused body was stored: %+v", list)
	}
}
