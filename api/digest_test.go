package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

func (e *env) admin(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

func TestAdminItemsEventsDigest(t *testing.T) {
	e := newEnv(t, Config{AdminToken: "s3cret"})
	for _, p := range []string{"/api/items", "/api/events", "/api/digest/run"} {
		if resp, _ := e.post(t, p, jsonCT, `{}`); resp.StatusCode != 401 {
			t.Fatalf("%s without a token: %d", p, resp.StatusCode)
		}
	}
	if code, m := e.admin(t, "POST", "/api/items", `{"title":"Release","url":"https://example.com/r","summary":"out now"}`); code != 201 || m["id"] == nil {
		t.Fatalf("add item: %d %v", code, m)
	}
	for _, bad := range []string{`{"title":"","url":"https://x.io"}`, `{"title":"t","url":"javascript:alert(1)"}`, `{"title":"a\nb","url":"https://x.io"}`, `{`} {
		if code, _ := e.admin(t, "POST", "/api/items", bad); code != 400 {
			t.Errorf("item %s: %d, want 400", bad, code)
		}
	}

	// An address nobody subscribed: said, nothing queued.
	if code, m := e.admin(t, "POST", "/api/events", `{"email":"A@Example.com","title":"New reply","url":"https://example.com/t/1"}`); code != 202 || m["status"] != "not subscribed" {
		t.Fatalf("event for nobody: %d %v", code, m)
	}
	if pending, _ := e.insp.ListPendingTasks(tasks.QueueDefault); len(pending) != 0 {
		t.Fatalf("an event for nobody was queued: %+v", pending)
	}
	a, err := e.store.Subscribe(context.Background(), store.SubscribeRequest{Email: "a@example.com", Activate: true})
	if err != nil {
		t.Fatal(err)
	}
	if code, m := e.admin(t, "POST", "/api/events", `{"email":"A@Example.com","title":"New reply","url":"https://example.com/t/1"}`); code != 202 || m["status"] != "queued" {
		t.Fatalf("event: %d %v", code, m)
	}
	if code, _ := e.admin(t, "POST", "/api/events", `{"email":"nope","title":"x","url":"https://example.com"}`); code != 400 {
		t.Fatalf("event for a non-address: %d", code)
	}
	// One ingress task, naming the person of the normalised address by id
	// (no address in the queue); the worker's fan-out makes the rest.
	pending, _ := e.insp.ListPendingTasks(tasks.QueueDefault)
	var fan tasks.FanoutPayload
	if len(pending) != 1 || pending[0].Type != tasks.TypeFanout || json.Unmarshal(pending[0].Payload, &fan) != nil ||
		fan.SubscriberID != a.ID || fan.Email != "" || strings.Contains(string(pending[0].Payload), "a@example.com") ||
		fan.Topic != "" || !strings.HasPrefix(fan.ID, "ev_") {
		t.Fatalf("event not queued as one fan-out for the subscriber %d: %+v", a.ID, pending)
	}
	// A topic's readers: a known topic, and only one of email and topic.
	if code, m := e.admin(t, "POST", "/api/events", `{"topic":"updates","title":"Launch","url":"https://example.com/l"}`); code != 202 || m["topic"] != "updates" || m["id"] == nil {
		t.Fatalf("topic event: %d %v", code, m)
	}
	for _, bad := range []string{
		`{"topic":"nope","title":"x","url":"https://example.com"}`,
		`{"topic":"updates","email":"a@example.com","title":"x","url":"https://example.com"}`,
		`{"title":"x","url":"https://example.com"}`,
	} {
		if code, _ := e.admin(t, "POST", "/api/events", bad); code != 400 {
			t.Errorf("event %s: %d, want 400", bad, code)
		}
	}
	// A URL no push message can carry: refused at intake, not a dead
	// letter in every reader's push lane. The longest one that fits is
	// taken.
	longest := "https://example.com/" + strings.Repeat("a", webpush.MaxPayload)
	for webpush.CheckEvent("Launch", longest) != nil {
		longest = longest[:len(longest)-1]
	}
	for _, to := range []string{`"topic":"updates"`, `"email":"a@example.com"`} {
		if code, m := e.admin(t, "POST", "/api/events", `{`+to+`,"title":"Launch","url":"`+longest+`x"}`); code != 400 || !strings.Contains(fmt.Sprint(m["error"]), "push") {
			t.Errorf("an event with a %d-byte url (%s): %d %v, want 400", len(longest)+1, to, code, m)
		}
	}
	if code, _ := e.admin(t, "POST", "/api/events", `{"topic":"updates","title":"Launch","url":"`+longest+`"}`); code != 202 {
		t.Errorf("an event with the longest url that fits (%d bytes): %d, want 202", len(longest), code)
	}
	if pending, _ := e.insp.ListPendingTasks(tasks.QueueDefault); len(pending) != 3 {
		t.Fatalf("a refused event was queued: %d tasks", len(pending))
	}

	if code, _ := e.admin(t, "GET", "/api/digests/2026-W49", ""); code != 404 {
		t.Fatalf("unknown run: %d", code)
	}
	code, m := e.admin(t, "POST", "/api/digest/run", `{"period":"2026-W49"}`)
	if code != 202 || m["period"] != "2026-W49" || m["status"] != "queued" {
		t.Fatalf("run: %d %v", code, m)
	}
	if _, m := e.admin(t, "POST", "/api/digest/run", `{"period":"2026-W49"}`); m["status"] != "already queued" {
		t.Fatalf("second run of the period: %v", m)
	}
	if code, _ := e.admin(t, "POST", "/api/digest/run", `{"period":"bad period!"}`); code != 400 {
		t.Fatalf("bad period: %d", code)
	}
	if code, m := e.admin(t, "POST", "/api/digest/run", ""); code != 202 || !strings.Contains(m["period"].(string), "-W") {
		t.Fatalf("run without a period: %d %v", code, m)
	}
	// The worker creates the run record; here the store does it directly.
	e.store.StartDigestRun(t.Context(), "2026-W49")
	code, m = e.admin(t, "GET", "/api/digests/2026-W49", "")
	if code != 200 || m["state"] != "planning" || m["planned"] != 0.0 || len(m["items"].([]any)) != 1 {
		t.Fatalf("progress: %d %v", code, m)
	}
	for _, k := range []string{"planned", "sent", "skipped", "failed"} {
		if _, ok := m[k]; !ok {
			t.Errorf("progress lacks %s", k)
		}
	}
}

func TestDigestRunMetrics(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := t.Context()
	reg := prometheus.NewRegistry()
	reg.MustRegister(DigestCollector{Store: e.store})
	if n, _ := testutil.GatherAndCount(reg); n != 0 {
		t.Fatalf("%d series before any run", n)
	}
	e.store.AddItem(ctx, store.Item{Title: "t", URL: "https://x.io"})
	e.store.StartDigestRun(ctx, "2026-W49")
	e.store.AdvanceDigestRun(ctx, "2026-W49", 10, 7, true)
	e.store.SetOutcome(ctx, "2026-W49", store.OutcomeSkipped, 3)
	// A complaint about the run's mail, after the 250.
	if _, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: "c@x.io", Activate: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.RecordFeedback(ctx, store.Feedback{Email: "c@x.io", Type: store.Complaint, Digest: true}, store.FeedbackPolicy{}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP newsletter_digest_run_recipients Recipients of the latest digest run by outcome (planned, sent, skipped, failed, and bounced or complained after the 250), as GET /api/digests/{period} shows them.
# TYPE newsletter_digest_run_recipients gauge
newsletter_digest_run_recipients{outcome="bounced",period="2026-W49"} 0
newsletter_digest_run_recipients{outcome="complained",period="2026-W49"} 1
newsletter_digest_run_recipients{outcome="failed",period="2026-W49"} 0
newsletter_digest_run_recipients{outcome="planned",period="2026-W49"} 7
newsletter_digest_run_recipients{outcome="sent",period="2026-W49"} 0
newsletter_digest_run_recipients{outcome="skipped",period="2026-W49"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// TestTitlesCountCharacters: a title's and a summary's limits are in
// characters, so 300 "é" (600 bytes) is a title as 300 "e" is, and one
// more character is refused.
func TestTitlesCountCharacters(t *testing.T) {
	e := newEnv(t, Config{AdminToken: "s3cret"})
	e1 := strings.Repeat("é", 300)
	item := func(title, summary string) string {
		b, _ := json.Marshal(map[string]string{"title": title, "url": "https://example.com/a", "summary": summary})
		return string(b)
	}
	if code, m := e.admin(t, "POST", "/api/items", item(e1, strings.Repeat("é", 2000))); code != http.StatusCreated {
		t.Fatalf("an item of 300 é and a summary of 2000 é: %d %v", code, m)
	}
	if code, _ := e.admin(t, "POST", "/api/items", item(e1+"é", "")); code != http.StatusBadRequest {
		t.Fatalf("an item of 301 é: %d", code)
	}
	if code, _ := e.admin(t, "POST", "/api/items", item("t", strings.Repeat("é", 2001))); code != http.StatusBadRequest {
		t.Fatalf("a summary of 2001 é: %d", code)
	}
	event := func(title string) string {
		b, _ := json.Marshal(map[string]string{"email": "reader@example.com", "title": title, "url": "https://example.com/a"})
		return string(b)
	}
	if code, m := e.admin(t, "POST", "/api/events", event(e1)); code != http.StatusAccepted {
		t.Fatalf("an event of 300 é: %d %v", code, m)
	}
	if code, _ := e.admin(t, "POST", "/api/events", event(e1+"é")); code != http.StatusBadRequest {
		t.Fatalf("an event of 301 é: %d", code)
	}
}

// An event's URL that a browser's push message carries but APNs' and
// FCM's cannot (their JSON writes each & as \u0026) is refused at intake
// too: taken, it would be a dead letter on every reader's phone.
func TestEventURLMustFitAppPushToo(t *testing.T) {
	e := newEnv(t, Config{AdminToken: "s3cret"})
	link := "https://example.com/?" + strings.Repeat("a&", 700)
	if err := webpush.CheckEvent("Launch", link); err != nil {
		t.Fatalf("the premise: a browser's message carries the url: %v", err)
	}
	if code, m := e.admin(t, "POST", "/api/events", `{"topic":"updates","title":"Launch","url":"`+link+`"}`); code != 400 || !strings.Contains(fmt.Sprint(m["error"]), "push") {
		t.Fatalf("an event whose url no app push can carry: %d %v, want 400", code, m)
	}
	if pending, _ := e.insp.ListPendingTasks(tasks.QueueDefault); len(pending) != 0 {
		t.Fatalf("a refused event was queued: %d tasks", len(pending))
	}
}

// TestEventInboxFields: an event's Markdown "body" and its
// "email_if_unread_after" are checked at intake and carried by the
// fan-out; the hold needs a channel that tracks reads and, when
// "channels" narrows the event, both e-mail and that channel.
func TestEventInboxFields(t *testing.T) {
	off := newEnv(t, Config{AdminToken: "s3cret"})
	if code, m := off.admin(t, "POST", "/api/events", `{"topic":"updates","title":"x","url":"https://example.com","email_if_unread_after":"10m"}`); code != 400 || !strings.Contains(fmt.Sprint(m["error"]), "inbox") {
		t.Errorf("a hold with no channel that tracks reads: %d %v", code, m)
	}
	e := newEnv(t, Config{AdminToken: "s3cret", ReadTrackers: []string{"chat"}})
	for _, bad := range []string{
		`"email_if_unread_after":"9s"`, `"email_if_unread_after":"169h"`, `"email_if_unread_after":"1d"`,
		`"email_if_unread_after":"-1m"`, `"email_if_unread_after":"10m","channels":["email"]`,
		`"body":"` + strings.Repeat("a", maxEventBody+1) + `"`,
	} {
		if code, _ := e.admin(t, "POST", "/api/events", `{"topic":"updates","title":"x","url":"https://example.com",`+bad+`}`); code != 400 {
			t.Errorf("%s: %d, want 400", bad, code)
		}
	}
	if pending, _ := e.insp.ListPendingTasks(tasks.QueueDefault); len(pending) != 0 {
		t.Fatalf("a refused event was queued: %d tasks", len(pending))
	}
	if code, m := e.admin(t, "POST", "/api/events", `{"topic":"updates","title":"x","url":"https://example.com","body":"**hi**","email_if_unread_after":"10s"}`); code != 202 {
		t.Fatalf("a held event: %d %v", code, m)
	}
	pending, _ := e.insp.ListPendingTasks(tasks.QueueDefault)
	var fan tasks.FanoutPayload
	if len(pending) != 1 || json.Unmarshal(pending[0].Payload, &fan) != nil || fan.Markdown != "**hi**" || fan.EmailIfUnreadAfter != 10*time.Second {
		t.Fatalf("the fan-out: %+v", fan)
	}
}
