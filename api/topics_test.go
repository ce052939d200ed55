package api

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

const formCT = "application/x-www-form-urlencoded"

// threeTopics is a topics file with a topic off by default and a
// three-step sequence.
func threeTopics(t *testing.T) *topics.Set {
	t.Helper()
	set, err := topics.Parse([]byte(`topics:
- {id: digest, name: Weekly digest, description: One mail a week., default: true}
- {id: updates, name: Product updates, default: true}
- {id: research, name: Research notes, default: false}
sequence:
  topic: digest
  steps:
  - {template: welcome, after: 1h}
  - {template: getting-started, after: 72h}
  - {template: best-of, after: 168h}
`), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func (e *env) topicsOf(t *testing.T, email string) []string {
	t.Helper()
	sub, err := e.store.Get(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	return sub.Topics
}

func TestSubscribeWithTopics(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true, Topics: threeTopics(t), AdminToken: feedbackAdmin})
	// The form lists every topic as a checkbox, the default ones ticked.
	_, page := e.get(t, "/")
	for _, want := range []string{
		`<input type="checkbox" id="topic-digest" name="topics" value="digest" checked>`,
		`<input type="checkbox" id="topic-updates" name="topics" value="updates" checked>`,
		`<input type="checkbox" id="topic-research" name="topics" value="research">`,
		`Research notes`, `One mail a week.`,
	} {
		if !strings.Contains(page, want) {
			t.Fatalf("form lacks %s", want)
		}
	}
	cases := []struct {
		ct, body string
		email    string
		want     []string
	}{
		// A form: the repeated field, as a browser sends ticked boxes.
		{formCT, "email=f%40x.io&topics_shown=1&topics=research&topics=digest", "f@x.io", []string{"digest", "research"}},
		// JSON: a list of ids.
		{jsonCT, `{"email":"j@x.io","topics":["updates"]}`, "j@x.io", []string{"updates"}},
		// No field at all (a client from before topics): the defaults.
		{jsonCT, `{"email":"d@x.io"}`, "d@x.io", []string{"digest", "updates"}},
	}
	for _, c := range cases {
		if resp, body := e.post(t, "/subscribe", c.ct, c.body); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: %d %s", c.body, resp.StatusCode, body)
		}
		if got := e.topicsOf(t, c.email); !slices.Equal(got, c.want) {
			t.Fatalf("%s: topics %v, want %v", c.email, got, c.want)
		}
	}
	// The admin view carries them.
	_, body := e.adminRaw(t, "GET", "/api/subscribers/f@x.io", "")
	if !strings.Contains(body, `"topics":["digest","research"]`) {
		t.Fatalf("admin view: %s", body)
	}
}

func TestSubscribeRefusesUnknownOrNoTopics(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true, Topics: threeTopics(t)})
	for _, c := range []struct{ ct, body, want string }{
		{jsonCT, `{"email":"a@x.io","topics":["digest","sports"]}`, `unknown topic \"sports\"`},
		{jsonCT, `{"email":"a@x.io","topics":[]}`, "choose at least one topic"},
		{jsonCT, `{"email":"a@x.io","topics":[1]}`, "must be a list of strings"},
		{jsonCT, `{"email":"a@x.io","topics":"digest"}`, "must be a list of strings"}, // the reference says a list
		{jsonCT, `{"email":"a@x.io","topics":["digest"]}`, ""},                        // accepted below
		{formCT, "email=a%40x.io&topics_shown=1", "choose at least one topic"},
		{formCT, "email=a%40x.io&topics_shown=1&topics=Digest", `unknown topic &#34;Digest&#34;`},
	} {
		resp, body := e.post(t, "/subscribe", c.ct, c.body)
		if c.want == "" {
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("%s: %d %s", c.body, resp.StatusCode, body)
			}
			if _, err := e.store.Unsubscribe(context.Background(), "a@x.io"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Fatalf("%s: %d %s, want 400 with %s", c.body, resp.StatusCode, body, c.want)
		}
	}
	// Nothing was stored by a refused signup, and nothing queued but the
	// one accepted confirmation.
	if n := e.taskCount(t, tasks.QueueTransactional); n != 1 {
		t.Fatalf("%d confirmations queued, want the accepted one's", n)
	}
	if e.status(t, "b@x.io") != "" {
		t.Fatal("stored")
	}
	resp, body := e.post(t, "/subscribe", formCT, "email=b%40x.io&topics_shown=1&topics=nope&topics=research")
	if resp.StatusCode != 400 || e.status(t, "b@x.io") != "" {
		t.Fatalf("unknown id: %d, stored as %q", resp.StatusCode, e.status(t, "b@x.io"))
	}
	// The form comes back with the boxes as the person ticked them.
	if !strings.Contains(body, `value="research" checked>`) || strings.Contains(body, `value="digest" checked>`) {
		t.Fatalf("form after a refusal:\n%s", body)
	}
}

// oneClick is what a mailbox provider does with List-Unsubscribe.
func (e *env) oneClick(t *testing.T, tok string) {
	t.Helper()
	resp, body := e.post(t, "/unsubscribe?token="+url.QueryEscape(tok), formCT, "List-Unsubscribe=One-Click")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("one-click: %d %s", resp.StatusCode, body)
	}
}

func TestOneClickLeavesItsTopicOnly(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false, Topics: threeTopics(t)})
	ctx := context.Background()
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"a@x.io","topics":["digest","updates","research"]}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	// The page of a topic's link names the topic.
	digestTok := e.signTopic(t, token.Unsubscribe, "a@x.io", "digest")
	if _, page := e.get(t, "/unsubscribe?token="+url.QueryEscape(digestTok)); !strings.Contains(page, "Stop <strong>Weekly digest</strong>") {
		t.Fatalf("page: %s", page)
	}
	e.oneClick(t, digestTok)
	sub, _ := e.store.Get(ctx, "a@x.io")
	if sub.Status != store.Active || !slices.Equal(sub.Topics, []string{"updates", "research"}) {
		t.Fatalf("after leaving digest: %+v", sub)
	}
	// The digest is the sequence's topic: its waiting step went with it.
	if _, err := e.insp.GetTaskInfo(tasks.QueueDefault, tasks.WelcomeTaskID("a@x.io")); err == nil {
		t.Fatal("the welcome still waits after the sequence's topic was left")
	}
	// Twice is harmless; the last topic left is unsubscribed.
	e.oneClick(t, digestTok)
	e.oneClick(t, e.signTopic(t, token.Unsubscribe, "a@x.io", "updates"))
	e.oneClick(t, e.signTopic(t, token.Unsubscribe, "a@x.io", "research"))
	if sub, _ := e.store.Get(ctx, "a@x.io"); sub.Status != store.Unsubscribed || len(sub.Topics) != 0 {
		t.Fatalf("after leaving every topic: %+v", sub)
	}
	// A link from before topics (no topic) leaves everything at once.
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"b@x.io"}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	e.oneClick(t, e.sign(t, token.Unsubscribe, "b@x.io"))
	if e.status(t, "b@x.io") != store.Unsubscribed {
		t.Fatal("an old link did not unsubscribe")
	}
}

func TestPreferenceCentre(t *testing.T) {
	const origin = "https://news.example.com"
	e := newEnv(t, Config{DoubleOptIn: false, Topics: threeTopics(t), Origin: origin})
	ctx := context.Background()
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"p@x.io","name":"Pat","timezone":"Europe/Berlin"}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	tok := e.sign(t, token.Preferences, "p@x.io")
	resp, page := e.get(t, "/preferences?token="+url.QueryEscape(tok))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, page)
	}
	for _, want := range []string{`value="digest" checked>`, `value="updates" checked>`, `value="research">`, `value="Pat"`, `value="Europe/Berlin"`, `name="leave" value="all"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("page lacks %s:\n%s", want, page)
		}
	}
	// Purpose-bound: other tokens do not open it, and its token does
	// nothing else.
	for _, other := range []string{e.sign(t, token.Confirm, "p@x.io"), e.sign(t, token.Unsubscribe, "p@x.io"), tok + "x"} {
		if resp, _ := e.get(t, "/preferences?token="+url.QueryEscape(other)); resp.StatusCode != 400 {
			t.Fatalf("preferences opened by another token: %d", resp.StatusCode)
		}
	}
	if resp, _ := e.post(t, "/confirm", formCT, "token="+url.QueryEscape(tok)); resp.StatusCode != 400 {
		t.Fatalf("a preferences token confirmed: %d", resp.StatusCode)
	}
	if resp, _ := e.post(t, "/unsubscribe?token="+url.QueryEscape(tok), formCT, "List-Unsubscribe=One-Click"); resp.StatusCode != 400 {
		t.Fatalf("a preferences token unsubscribed: %d", resp.StatusCode)
	}
	// Another site's page cannot post it.
	save := url.Values{"token": {tok}, "topics": {"updates", "research"}, "name": {"Pat Lee"}, "timezone": {"Asia/Tokyo"}}
	if resp, _ := e.prefsPost(t, "/preferences", "https://evil.example", save); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site: %d", resp.StatusCode)
	}
	if resp, _ := e.prefsPost(t, "/preferences", "", save); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("no origin: %d", resp.StatusCode)
	}
	// A bad time zone changes nothing and says why.
	bad := url.Values{"token": {tok}, "topics": {"updates"}, "timezone": {"Mars/Olympus"}}
	if resp, body := e.prefsPost(t, "/preferences", origin, bad); resp.StatusCode != 400 || !strings.Contains(body, "unknown time zone") {
		t.Fatalf("bad zone: %d %s", resp.StatusCode, body)
	}
	bad = url.Values{"token": {tok}, "topics": {"updates", "sports"}}
	if resp, body := e.prefsPost(t, "/preferences", origin, bad); resp.StatusCode != 400 || !strings.Contains(body, "unknown topic") {
		t.Fatalf("unknown topic: %d %s", resp.StatusCode, body)
	}
	if sub, _ := e.store.Get(ctx, "p@x.io"); sub.Timezone != "Europe/Berlin" || len(sub.Topics) != 2 {
		t.Fatalf("a refused save changed %+v", sub)
	}
	// Saving from our page.
	// The answer goes back to the page at its link (Post/Redirect/Get),
	// which says it saved and keeps working on a reload.
	resp, body := e.prefsPost(t, "/preferences", origin, save)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/preferences?token="+url.QueryEscape(tok)+"&saved=1" {
		t.Fatalf("save: %d %q %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	for range 2 {
		if resp, body := e.get(t, resp.Header.Get("Location")); resp.StatusCode != 200 || !strings.Contains(body, "Saved.") || !strings.Contains(body, `value="updates" checked`) {
			t.Fatalf("the page after the save: %d %s", resp.StatusCode, body)
		}
	}
	sub, _ := e.store.Get(ctx, "p@x.io")
	if sub.Status != store.Active || !slices.Equal(sub.Topics, []string{"updates", "research"}) || sub.Name != "Pat Lee" || sub.Timezone != "Asia/Tokyo" {
		t.Fatalf("after save: %+v", sub)
	}
	if _, err := e.insp.GetTaskInfo(tasks.QueueDefault, tasks.WelcomeTaskID("p@x.io")); err == nil {
		t.Fatal("the sequence's step still waits after its topic was turned off")
	}
	// Turning the sequence's topic back on resumes it.
	save["topics"] = []string{"digest", "updates"}
	if resp, _ := e.prefsPost(t, "/preferences", origin, save); resp.StatusCode != http.StatusSeeOther {
		t.Fatal(resp.StatusCode)
	}
	if info, err := e.insp.GetTaskInfo(tasks.QueueDefault, tasks.WelcomeTaskID("p@x.io")); err != nil || info.State != asynq.TaskStatePending {
		t.Fatalf("resumed step: %+v %v", info, err)
	}
	// Leave everything: one button.
	resp, body = e.prefsPost(t, "/preferences", origin, url.Values{"token": {tok}, "leave": {"all"}})
	if resp.StatusCode != 200 || !strings.Contains(body, "You are unsubscribed") {
		t.Fatalf("leave: %d %s", resp.StatusCode, body)
	}
	if sub, _ := e.store.Get(ctx, "p@x.io"); sub.Status != store.Unsubscribed || len(sub.Topics) != 0 {
		t.Fatalf("after leave=all: %+v", sub)
	}
	if _, err := e.insp.GetTaskInfo(tasks.QueueDefault, tasks.WelcomeTaskID("p@x.io")); err == nil {
		t.Fatal("a step still waits after leaving everything")
	}
	// The page of someone who left says so and offers nothing to change.
	if _, page := e.get(t, "/preferences?token="+url.QueryEscape(tok)); !strings.Contains(page, "You are not subscribed") || strings.Contains(page, "checkbox") {
		t.Fatalf("page after leaving: %s", page)
	}
	// Unticking every box is leaving too.
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"q@x.io"}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	qtok := e.sign(t, token.Preferences, "q@x.io")
	if resp, body := e.prefsPost(t, "/preferences", origin, url.Values{"token": {qtok}}); resp.StatusCode != 200 || !strings.Contains(body, "You are unsubscribed") {
		t.Fatalf("no box ticked: %d %s", resp.StatusCode, body)
	}
	if e.status(t, "q@x.io") != store.Unsubscribed {
		t.Fatal("no topic left but still subscribed")
	}
}
