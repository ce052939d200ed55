package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/webhook"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

const hooksAdmin = "hooks-admin-token"

// newHooksEnv is an API with the admin routes and the webhook notifier.
func newHooksEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	cfg.AdminToken = hooksAdmin
	return newEnvWith(t, cfg, func(d *Deps) {
		d.Notify = &webhooks.Notifier{Endpoints: d.Store, Queue: d.Queue, Log: d.Log}
		d.Now = func() time.Time { return time.Now().Add(time.Duration(apiLater.Load())) }
	})
}

// apiLater moves the API's clock ahead of the store's (the tests of this
// file run one at a time).
var apiLater atomic.Int64

func (e *env) hookAdmin(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+hooksAdmin)
	req.Header.Set("Content-Type", jsonCT)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) hooks(t *testing.T) []store.Webhook {
	t.Helper()
	list, err := e.store.ListWebhooks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// webhookTasks are the webhook deliveries waiting in the queue.
func (e *env) webhookTasks(t *testing.T) []tasks.WebhookPayload {
	t.Helper()
	pending, err := e.insp.ListPendingTasks(tasks.QueueWebhook)
	if err != nil {
		return nil // no such queue yet
	}
	var out []tasks.WebhookPayload
	for _, info := range pending {
		var p tasks.WebhookPayload
		if err := json.Unmarshal(info.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if info.ID != tasks.WebhookTaskID(p.Endpoint, p.ID) {
			t.Fatalf("task id %s for %s/%s", info.ID, p.Endpoint, p.ID)
		}
		out = append(out, p)
	}
	return out
}

// A registration answers the id and the secret once; the list shows the
// endpoint with its state and never its secret; removal is for good.
func TestWebhookRegistration(t *testing.T) {
	e := newHooksEnv(t, Config{DoubleOptIn: true})
	code, body := e.hookAdmin(t, "POST", "/api/webhooks", `{"url":"https://8.8.8.8/hooks/newsletter","events":["subscriber.confirmed","issue.sent","subscriber.confirmed"]}`)
	var created struct {
		ID, Secret, State, URL string
		Events                 []string
	}
	if err := json.Unmarshal([]byte(body), &created); code != http.StatusCreated || err != nil {
		t.Fatalf("register: %d %s", code, body)
	}
	if !strings.HasPrefix(created.ID, "wh_") || !strings.HasPrefix(created.Secret, "whsec_") || created.State != "active" ||
		strings.Join(created.Events, ",") != "subscriber.confirmed,issue.sent" {
		t.Fatalf("register answered %s", body)
	}
	if _, err := webhook.Sign(created.Secret, "msg_x", time.Now(), nil); err != nil {
		t.Fatalf("the secret shown cannot sign: %v", err)
	}
	code, body = e.hookAdmin(t, "GET", "/api/webhooks", "")
	if code != 200 || !strings.Contains(body, `"id":"`+created.ID+`"`) || !strings.Contains(body, `"state":"active"`) {
		t.Fatalf("list: %d %s", code, body)
	}
	if strings.Contains(body, created.Secret) || strings.Contains(body, "whsec_") || strings.Contains(body, "secret") {
		t.Fatalf("the list shows the secret: %s", body)
	}
	// Disabled endpoints are shown as such, and can be enabled.
	if _, err := e.store.DisableWebhook(context.Background(), created.ID); err != nil {
		t.Fatal(err)
	}
	if code, body = e.hookAdmin(t, "GET", "/api/webhooks", ""); !strings.Contains(body, `"state":"disabled"`) {
		t.Fatalf("a disabled endpoint listed as %s", body)
	}
	if code, body = e.hookAdmin(t, "POST", "/api/webhooks/"+created.ID+"/enable", ""); code != 200 || !strings.Contains(body, `"state":"active"`) || strings.Contains(body, "whsec_") {
		t.Fatalf("enable: %d %s", code, body)
	}
	if code, _ = e.hookAdmin(t, "DELETE", "/api/webhooks/"+created.ID, ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	if code, _ = e.hookAdmin(t, "DELETE", "/api/webhooks/"+created.ID, ""); code != http.StatusNotFound {
		t.Fatalf("delete twice: %d", code)
	}
	if code, _ = e.hookAdmin(t, "POST", "/api/webhooks/"+created.ID+"/enable", ""); code != http.StatusNotFound {
		t.Fatalf("enable a removed endpoint: %d", code)
	}
	if code, body = e.hookAdmin(t, "GET", "/api/webhooks", ""); code != 200 || body != "{\"webhooks\":[]}\n" {
		t.Fatalf("list after delete: %d %s", code, body)
	}
	// Only the admin.
	req, _ := http.NewRequest("POST", e.srv.URL+"/api/webhooks", strings.NewReader(`{"url":"https://8.8.8.8/h","events":["issue.sent"]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(e.hooks(t)) != 0 {
		t.Fatalf("without the token: %d, %d endpoints", resp.StatusCode, len(e.hooks(t)))
	}
}

// Bad registrations: a clear 400 and nothing stored.
func TestWebhookRegistrationRefusals(t *testing.T) {
	e := newHooksEnv(t, Config{DoubleOptIn: true})
	for _, tc := range []struct{ body, says string }{
		{`{"url":"https://8.8.8.8/h","events":["subscriber.created"]}`, `unknown event "subscriber.created"`},
		{`{"url":"https://8.8.8.8/h","events":[]}`, `want "events"`},
		{`{"url":"https://8.8.8.8/h"}`, `want "events"`},
		{`{"url":"https://8.8.8.8/h","events":"issue.sent"}`, `must be a list of strings`},
		{`{"url":"https://8.8.8.8/h","events":[1]}`, `must be a list of strings`},
		{`{"events":["issue.sent"]}`, `want "url"`},
		{`{"url":"http://8.8.8.8/h","events":["issue.sent"]}`, "https://"},
		{`{"url":"ftp://8.8.8.8/h","events":["issue.sent"]}`, "https://"},
		{`{"url":"https://127.0.0.1/h","events":["issue.sent"]}`, "not public"},
		{`{"url":"https://[::1]/h","events":["issue.sent"]}`, "not public"},
		{`{"url":"https://10.1.2.3/h","events":["issue.sent"]}`, "not public"},
		{`{"url":"https://192.168.0.10/h","events":["issue.sent"]}`, "not public"},
		{`{"url":"https://169.254.169.254/latest/meta-data","events":["issue.sent"]}`, "not public"},
		{`{"url":"https://localhost/h","events":["issue.sent"]}`, "not public"},
		{`{"url":"https://user:pw@8.8.8.8/h","events":["issue.sent"]}`, "user or password"},
		{`{"url":"https://8.8.8.8/h h","events":["issue.sent"]}`, "without spaces"},
		{`{"url":"https://8.8.8.8/` + strings.Repeat("a", 2100) + `","events":["issue.sent"]}`, "2048"},
		{`{"url":"https://8.8.8.8/h","events":["issue.sent"],"secret":"mine"}`, `unknown field "secret"`},
		{`{"url":"https://8.8.8.8/h","url":"https://8.8.4.4/h","events":["issue.sent"]}`, "given twice"},
		{`["https://8.8.8.8/h"]`, "JSON object"},
		{`not json`, ""},
	} {
		code, body := e.hookAdmin(t, "POST", "/api/webhooks", tc.body)
		var answer struct{ Error string }
		_ = json.Unmarshal([]byte(body), &answer)
		if code != http.StatusBadRequest || answer.Error == "" || !strings.Contains(answer.Error, tc.says) {
			t.Errorf("%s: %d %s, want 400 saying %q", tc.body, code, body, tc.says)
		}
	}
	if n := len(e.hooks(t)); n != 0 {
		t.Fatalf("%d endpoints stored from bad registrations", n)
	}
}

// With NEWSLETTER_WEBHOOK_ALLOW_PRIVATE an endpoint on this machine, over
// plain http, is accepted (tests, development).
func TestWebhookRegistrationAllowPrivate(t *testing.T) {
	e := newHooksEnv(t, Config{DoubleOptIn: true, Endpoints: netguard.Guard{AllowPrivate: true}})
	if code, body := e.hookAdmin(t, "POST", "/api/webhooks", `{"url":"http://127.0.0.1:9/hooks","events":["issue.sent"]}`); code != http.StatusCreated {
		t.Fatalf("a private endpoint with private addresses allowed: %d %s", code, body)
	}
}

// The API's changes are events for the endpoints that asked: a
// confirmation, a signup without double opt-in, an unsubscribe (once, and
// only of someone who had confirmed), leaving by the preference centre.
// Without an endpoint that wants them, nothing is queued.
func TestSubscriberEventsFromTheAPI(t *testing.T) {
	e := newHooksEnv(t, Config{DoubleOptIn: true, Origin: "https://news.example.com"})
	ctx := context.Background()
	confirm := func(email string) {
		t.Helper()
		tok := e.sign(t, token.Confirm, email)
		if resp, body := e.post(t, "/confirm", formCT, "token="+url.QueryEscape(tok)); resp.StatusCode != 200 {
			t.Fatalf("confirm %s: %d %s", email, resp.StatusCode, body)
		}
	}
	subscribe := func(email string) {
		t.Helper()
		if resp, body := e.post(t, "/subscribe", jsonCT, `{"email":"`+email+`"}`); resp.StatusCode != 202 {
			t.Fatalf("subscribe %s: %d %s", email, resp.StatusCode, body)
		}
	}
	subscribe("early@example.com")
	confirm("early@example.com")
	if got := e.webhookTasks(t); len(got) != 0 {
		t.Fatalf("%d webhook tasks with no endpoint", len(got))
	}

	code, body := e.hookAdmin(t, "POST", "/api/webhooks", `{"url":"https://8.8.8.8/crm","events":["subscriber.confirmed","subscriber.unsubscribed"]}`)
	if code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	crm := e.hooks(t)[0].ID
	if code, body = e.hookAdmin(t, "POST", "/api/webhooks", `{"url":"https://8.8.4.4/audit","events":["issue.sent"]}`); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}

	subscribe("ann@example.com")
	if got := e.webhookTasks(t); len(got) != 0 {
		t.Fatalf("a pending signup is an event: %+v", got)
	}
	confirm("ann@example.com")
	confirm("ann@example.com") // already active: no second event
	got := e.webhookTasks(t)
	ann, _ := e.store.Get(ctx, "ann@example.com")
	if len(got) != 1 || got[0].Endpoint != crm || got[0].Type != tasks.WebhookSubscriberConfirmed {
		t.Fatalf("after confirming: %+v", got)
	}
	var ev struct {
		Type string
		Data tasks.WebhookSubscriberData
	}
	if err := json.Unmarshal([]byte(got[0].Body), &ev); err != nil || ev.Type != tasks.WebhookSubscriberConfirmed ||
		ev.Data != (tasks.WebhookSubscriberData{ID: ann.ID, Email: "ann@example.com"}) {
		t.Fatalf("the event: %s (%v)", got[0].Body, err)
	}

	// One-click unsubscribe: an event; the same link again: none.
	for range 2 {
		e.oneClick(t, e.sign(t, token.Unsubscribe, "ann@example.com"))
	}
	if got = e.webhookTasks(t); len(got) != 2 || got[1].Type != tasks.WebhookSubscriberUnsubscribed {
		t.Fatalf("after unsubscribing twice: %+v", got)
	}
	// The same link a day later, when the first event's task is gone:
	// still no news.
	if err := e.insp.DeleteTask(tasks.QueueWebhook, tasks.WebhookTaskID(got[1].Endpoint, got[1].ID)); err != nil {
		t.Fatal(err)
	}
	// The same link at once, the first event delivered and its task
	// gone: no news either. The store says whether this call ended the
	// subscription; no window of time guesses it.
	e.oneClick(t, e.sign(t, token.Unsubscribe, "ann@example.com"))
	if got = e.webhookTasks(t); len(got) != 1 {
		t.Fatalf("an unsubscribe link used again reported again: %+v", got)
	}
	apiLater.Store(int64(24 * time.Hour))
	defer apiLater.Store(0)
	e.oneClick(t, e.sign(t, token.Unsubscribe, "ann@example.com"))
	if got = e.webhookTasks(t); len(got) != 1 {
		t.Fatalf("an old unsubscribe reported again: %+v", got)
	}
	apiLater.Store(0)
	// Someone who never confirmed leaves: no system of the admin's knows
	// them, and anyone could type the address.
	subscribe("never@example.com")
	e.oneClick(t, e.sign(t, token.Unsubscribe, "never@example.com"))
	if got = e.webhookTasks(t); len(got) != 1 {
		t.Fatalf("an unconfirmed address's unsubscribe is an event: %+v", got[1:])
	}
	// Leaving from the preference centre.
	subscribe("pat@example.com")
	confirm("pat@example.com")
	req, _ := http.NewRequest("POST", e.srv.URL+"/preferences", strings.NewReader(url.Values{"token": {e.sign(t, token.Preferences, "pat@example.com")}, "leave": {"all"}}.Encode()))
	req.Header.Set("Content-Type", formCT)
	req.Header.Set("Origin", "https://news.example.com")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got = e.webhookTasks(t); len(got) != 3 || got[1].Type != tasks.WebhookSubscriberConfirmed || got[2].Type != tasks.WebhookSubscriberUnsubscribed {
		t.Fatalf("after pat confirmed and left: %+v", got)
	}
}

// Without double opt-in, the signup is the confirmation.
func TestSignupWithoutDoubleOptInIsConfirmed(t *testing.T) {
	e := newHooksEnv(t, Config{DoubleOptIn: false})
	if code, body := e.hookAdmin(t, "POST", "/api/webhooks", `{"url":"https://8.8.8.8/crm","events":["subscriber.confirmed"]}`); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"fast@example.com"}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	if got := e.webhookTasks(t); len(got) != 1 || got[0].Type != tasks.WebhookSubscriberConfirmed || !strings.Contains(got[0].Body, "fast@example.com") {
		t.Fatalf("a signup without double opt-in: %+v", got)
	}
}
