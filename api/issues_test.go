package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// fakeIssueMail records test sends; previews are the body as text.
type fakeIssueMail struct {
	mu    sync.Mutex
	tests [][]string
}

func (f *fakeIssueMail) Preview(_ context.Context, is store.Issue, topic, format string) (string, []byte, error) {
	return "text/plain", []byte(topic + ":" + is.Body), nil
}

// HTMLSize is the body's length: a test makes an issue as large as it
// needs.
func (f *fakeIssueMail) HTMLSize(_ context.Context, is store.Issue) (int, error) {
	return len(is.Body), nil
}

func (f *fakeIssueMail) SendTest(_ context.Context, _ store.Issue, emails []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tests = append(f.tests, emails)
	return nil
}

type issueEnv struct {
	*env
	st   *store.Redis
	mail *fakeIssueMail
}

func newIssueEnv(t *testing.T) *issueEnv {
	t.Helper()
	ie := &issueEnv{mail: &fakeIssueMail{}}
	ie.env = newEnvWith(t, Config{AdminToken: "s3cret"}, func(d *Deps) {
		ie.st = d.Store.(*store.Redis)
		*d = d.WithIssues(ie.st, ie.mail)
	})
	return ie
}

func (e *issueEnv) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *issueEnv) create(t *testing.T, body string) int64 {
	t.Helper()
	code, out := e.do(t, "POST", "/api/issues", body)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, out)
	}
	var r struct{ ID int64 }
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// snapshot is everything a bad request could change: every issue with its
// versions, the outbox and the queued plans.
func (e *issueEnv) snapshot(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	list, err := e.st.ListIssues(ctx, "", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, is := range list {
		vers, err := e.st.IssueVersions(ctx, is.ID)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%+v %+v\n", is, vers)
	}
	out, err := e.st.OutboxDue(ctx, time.Now().Add(24*365*time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "outbox %d queued %d tests %d", len(out), e.taskCount(t, tasks.QueueCritical), len(e.mail.tests))
	return b.String()
}

const goodIssue = `{"subject":"March","body":"Hello **you**","topics":["digest"]}`

// TestIssueBadInputChangesNothing: each bad field the issue lists is a
// clear 4xx, and nothing (issue, version, outbox, queue, test mail) changes.
func TestIssueBadInputChangesNothing(t *testing.T) {
	e := newIssueEnv(t)
	id := e.create(t, goodIssue)
	p := fmt.Sprintf("/api/issues/%d", id)
	bigBody := `{"subject":"Big","body":"` + strings.Repeat("a", issues.MaxBody+1) + `","topics":["digest"]}`
	badContent := map[string]struct {
		body string
		code int
	}{
		"unknown topic":     {`{"subject":"S","body":"b","topics":["nope"]}`, 400},
		"no topic":          {`{"subject":"S","body":"b","topics":[]}`, 400},
		"topic twice":       {`{"subject":"S","body":"b","topics":["digest","digest"]}`, 400},
		"empty subject":     {`{"subject":"  ","body":"b","topics":["digest"]}`, 400},
		"subject with CR":   {`{"subject":"a\rBcc: x@example.com","body":"b","topics":["digest"]}`, 400},
		"subject with LF":   {`{"subject":"a\nb","body":"b","topics":["digest"]}`, 400},
		"subject too long":  {`{"subject":"` + strings.Repeat("é", issues.MaxSubject+1) + `","body":"b","topics":["digest"]}`, 400},
		"preheader with LF": {`{"subject":"S","preheader":"a\nb","body":"b","topics":["digest"]}`, 400},
		"unknown field":     {`{"subject":"S","body":"b","topics":["digest"],"status":"sent"}`, 400},
		"body over 512 KB":  {bigBody, 413},
	}
	before := e.snapshot(t)
	for name, c := range badContent {
		for _, req := range [][2]string{{"POST", "/api/issues"}, {"PUT", p}} {
			code, out := e.do(t, req[0], req[1], c.body)
			if code != c.code || !strings.Contains(out, "error") {
				t.Errorf("%s %s: %s: %d %s, want %d with an error", req[0], req[1], name, code, out, c.code)
			}
		}
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	badSend := map[string]string{
		"time in the past":    `{"at":"2020-01-01T09:00:00Z"}`,
		"not a time":          `{"at":"next tuesday"}`,
		"invalid zone offset": `{"at":"2099-01-01T09:00:00+25:00"}`,
		"invalid hour":        `{"local_time":"25:00"}`,
		"hour without a zero": `{"local_time":"9:00"}`,
		"hour not a time":     `{"local_time":"noon"}`,
		"both":                `{"at":"` + future + `","local_time":"09:00"}`,
		"unknown field":       `{"zone":"Mars/Base"}`,
	}
	for name, body := range badSend {
		if code, out := e.do(t, "POST", p+"/send", body); code != 400 {
			t.Errorf("send: %s: %d %s, want 400", name, code, out)
		}
	}
	var eleven []string
	for i := range issues.MaxTestEmails + 1 {
		eleven = append(eleven, fmt.Sprintf(`"t%d@example.com"`, i))
	}
	for name, body := range map[string]string{
		"11 addresses": `{"emails":[` + strings.Join(eleven, ",") + `]}`,
		"none":         `{"emails":[]}`,
		"bad address":  `{"emails":["not an address"]}`,
	} {
		if code, out := e.do(t, "POST", p+"/test", body); code != 400 {
			t.Errorf("test: %s: %d %s, want 400", name, code, out)
		}
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("bad input changed something:\nbefore %s\nafter  %s", before, after)
	}
	is, _ := e.st.Issue(context.Background(), id)
	if is.Status != store.IssueDraft || is.Version != 1 {
		t.Fatalf("issue after bad input: %+v", is)
	}
}

// TestIssueSentIsFrozen: a second send is 409; editing or sending a
// sending or sent issue is 409, and it stays as it was.
func TestIssueSentIsFrozen(t *testing.T) {
	e := newIssueEnv(t)
	ctx := context.Background()
	id := e.create(t, goodIssue)
	p := fmt.Sprintf("/api/issues/%d", id)
	if code, out := e.do(t, "POST", p+"/send", `{"force":true}`); code != http.StatusAccepted {
		t.Fatalf("send: %d %s", code, out)
	}
	if _, err := e.insp.GetTaskInfo(tasks.QueueCritical, tasks.IssuePlanTaskID(id, 1)); err != nil {
		t.Fatalf("the plan is not queued: %v", err)
	}
	// The dispatcher clears the plan's outbox entry in the background.
	poll.True(t, poll.BusyMachine, "the outbox entry cleared", func() bool {
		left, err := e.st.OutboxDue(ctx, time.Now().Add(time.Hour), 10)
		return err == nil && len(left) == 0
	})
	check := func(status string) {
		t.Helper()
		before := e.snapshot(t)
		for _, req := range [][3]string{{"POST", p + "/send", `{}`}, {"POST", p + "/send", `{"local_time":"09:00"}`}, {"PUT", p, `{"subject":"Changed","body":"x","topics":["digest"]}`}} {
			if code, out := e.do(t, req[0], req[1], req[2]); code != http.StatusConflict {
				t.Errorf("%s %s on a %s issue: %d %s, want 409", req[0], req[1], status, code, out)
			}
		}
		if after := e.snapshot(t); after != before {
			t.Fatalf("a refused change on a %s issue changed something:\nbefore %s\nafter  %s", status, before, after)
		}
	}
	check(store.IssueSending)
	if _, err := e.st.TransitionIssue(ctx, id, []string{store.IssueSending}, store.IssueSent, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	check(store.IssueSent)
	is, _ := e.st.Issue(ctx, id)
	if is.Subject != "March" || is.Version != 1 || is.Status != store.IssueSent {
		t.Fatalf("the sent issue changed: %+v", is)
	}
}

// TestIssueSendSurvivesAFailedEnqueue: the plan's outbox entry is written
// with the status, so when the enqueue fails (or the process dies between
// the two) the relay queues the plan: the issue is never left "sending"
// with nobody planning it. Before the outbox, the send was undone (and a
// crash between the two steps left the issue stuck in "sending").
func TestIssueSendSurvivesAFailedEnqueue(t *testing.T) {
	e := newIssueEnv(t)
	ctx := context.Background()
	id := e.create(t, goodIssue)
	p := fmt.Sprintf("/api/issues/%d", id)
	e.queue.failNext = 1
	if code, out := e.do(t, "POST", p+"/send", `{"force":true}`); code != http.StatusAccepted {
		t.Fatalf("send with the queue down: %d %s, want 202 (the relay queues the plan)", code, out)
	}
	if is, _ := e.st.Issue(ctx, id); is.Status != store.IssueSending {
		t.Fatalf("status %s, want sending", is.Status)
	}
	if _, err := e.insp.GetTaskInfo(tasks.QueueCritical, tasks.IssuePlanTaskID(id, 1)); err == nil {
		t.Fatal("the failed enqueue queued the plan anyway: the test proves nothing")
	}
	relay := &tasks.Relay{Store: e.st, Queue: e.queue, Grace: time.Nanosecond, Now: func() time.Time { return time.Now().Add(time.Minute) }}
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("relay: %d entries, %v; want 1", n, err)
	}
	if _, err := e.insp.GetTaskInfo(tasks.QueueCritical, tasks.IssuePlanTaskID(id, 1)); err != nil {
		t.Fatalf("the relay did not queue the plan: %v", err)
	}

	// A resume is a plan of a new round: the same holds.
	if code, out := e.do(t, "POST", p+"/pause", ``); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, out)
	}
	e.queue.failNext = 1
	if code, out := e.do(t, "POST", p+"/resume", ``); code != http.StatusOK {
		t.Fatalf("resume with the queue down: %d %s", code, out)
	}
	if n, err := relay.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("relay after the resume: %d entries, %v; want 1", n, err)
	}
	if _, err := e.insp.GetTaskInfo(tasks.QueueCritical, tasks.IssuePlanTaskID(id, 2)); err != nil {
		t.Fatalf("the relay did not queue round 2's plan: %v", err)
	}
	if left, _ := e.st.OutboxDue(ctx, time.Now().Add(time.Hour), 10); len(left) != 0 {
		t.Fatalf("outbox entries left: %+v", left)
	}
}

// TestIssueScheduledPlanIsDueAtItsTime: a send at a time queues its plan
// due at that time.
func TestIssueScheduledPlanIsDueAtItsTime(t *testing.T) {
	e := newIssueEnv(t)
	id := e.create(t, goodIssue)
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	if code, out := e.do(t, "POST", fmt.Sprintf("/api/issues/%d/send", id), `{"at":"`+at.Format(time.RFC3339)+`","force":true}`); code != http.StatusAccepted {
		t.Fatalf("send at: %d %s", code, out)
	}
	info, err := e.insp.GetTaskInfo(tasks.QueueCritical, tasks.IssuePlanTaskID(id, 1))
	if err != nil || !info.NextProcessAt.Equal(at) {
		t.Fatalf("plan %+v %v, want due at %s", info, err, at)
	}
}

// An issue takes a segment by name or id (an unknown one is a 400,
// nothing stored); its audience is the segment's active people; a
// segment an unsent issue goes to cannot be deleted.
func TestIssueToSegment(t *testing.T) {
	e := newIssueEnv(t)
	ctx := context.Background()
	for i, tags := range [][]string{{"beta"}, {"beta"}, nil} {
		sub, err := e.st.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("p%d@x.io", i), Activate: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.AddTags(ctx, sub.ID, append(tags, "known")); err != nil {
			t.Fatal(err)
		}
	}
	seg, err := e.st.CreateSegment(ctx, "Beta", "tag:beta")
	if err != nil {
		t.Fatal(err)
	}
	before := e.snapshot(t)
	for _, body := range []string{
		`{"subject":"S","body":"B","segment":"Nobody"}`,
		`{"subject":"S","body":"B"}`,
	} {
		if code, out := e.do(t, "POST", "/api/issues", body); code != http.StatusBadRequest || !strings.Contains(out, "segment") {
			t.Fatalf("%s: %d %s", body, code, out)
		}
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("a refused issue changed the store:\n%s\n%s", before, after)
	}
	id := e.create(t, `{"subject":"For beta","body":"Hello","segment":"Beta"}`)
	is, err := e.st.Issue(ctx, id)
	if err != nil || is.Segment != seg.ID || len(is.Topics) != 0 {
		t.Fatalf("stored: %+v %v", is, err)
	}
	if code, out := e.do(t, "GET", fmt.Sprintf("/api/issues/%d/audience", id), ""); code != 200 || !strings.Contains(out, `"audience":2`) {
		t.Fatalf("audience: %d %s", code, out)
	}
	// By id too, with a topic: the segment's readers of that topic.
	id2 := e.create(t, fmt.Sprintf(`{"subject":"For beta","body":"Hello","segment":"%d","topics":["updates"]}`, seg.ID))
	if code, out := e.do(t, "GET", fmt.Sprintf("/api/issues/%d/audience", id2), ""); code != 200 || !strings.Contains(out, `"audience":2`) {
		t.Fatalf("audience with a topic: %d %s", code, out)
	}
	if code, out := e.do(t, "DELETE", fmt.Sprintf("/api/segments/%d", seg.ID), ""); code != http.StatusConflict || !strings.Contains(out, "change or cancel it first") {
		t.Fatalf("delete a segment in use: %d %s", code, out)
	}
}
