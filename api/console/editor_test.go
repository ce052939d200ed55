package console_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/webhook"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

// receiver is a webhook endpoint that keeps what it is posted.
type receiver struct {
	mu   sync.Mutex
	got  []http.Header
	body [][]byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got, rc.body = append(rc.got, r.Header.Clone()), append(rc.body, b)
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) posts() ([]http.Header, [][]byte) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.got, rc.body
}

// verify checks a delivery's signature as a receiver does (Standard
// Webhooks: HMAC-SHA256 of "id.timestamp.body" with the secret's key).
func verify(secret string, h http.Header, body []byte) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("no valid signature in " + h.Get("webhook-signature"))
}

// startWebhookWorker runs the webhook lane on the console's Redis.
func startWebhookWorker(t *testing.T, e *env) {
	t.Helper()
	client := asynq.NewClientFromRedisClient(e.rdb)
	hooks := worker.NewHandlers(worker.Deps{Store: e.st, Queue: client, Log: quietLog(),
		WebhookPost: webhook.NewSender(netguard.Guard{AllowPrivate: true})}).Webhooks
	w := worker.New(e.rdb, worker.Config{ShutdownTimeout: time.Second, PollInterval: 50 * time.Millisecond, Log: quietLog(),
		Lanes: []worker.Lane{{Name: tasks.LaneWebhook, Concurrency: 1}}},
		worker.Handlers{Webhooks: hooks})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
}

var secretRe = regexp.MustCompile(`<pre data-field="secret">(whsec_[^<]+)</pre>`)

// TestWebhooksPage: an admin registers an endpoint (its secret shown
// once), sends it a test event, which the worker signs and posts and the
// page lists among the deliveries; disable refuses tests; enable; remove.
// Editors do not see the page.
func TestWebhooksPage(t *testing.T) {
	e := newEnv(t)
	startWebhookWorker(t, e)
	rc := &receiver{}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	b := e.signedIn(t, adminToken)
	if p := b.post("/admin/webhooks", url.Values{"url": {hook.URL + "/in"}, "events": {"nope"}}); p.code != 400 || !strings.Contains(p.body, "unknown event") {
		t.Fatalf("unknown event: %d", p.code)
	}
	p := b.post("/admin/webhooks", url.Values{"url": {hook.URL + "/in"}, "events": {"issue.sent", "subscriber.confirmed"}})
	m := secretRe.FindStringSubmatch(p.body)
	if p.code != 201 || m == nil {
		t.Fatalf("register: %d\n%s", p.code, p.body)
	}
	secret := html.UnescapeString(m[1])
	list, _ := e.st.ListWebhooks(t.Context())
	if len(list) != 1 || list[0].Secret != secret {
		t.Fatalf("stored: %+v", list)
	}
	id := list[0].ID
	page := b.get("/admin/webhooks")
	mustContain(t, "list", page, hook.URL+"/in", "issue.sent, subscriber.confirmed", "No deliveries yet.")
	if strings.Contains(page.body, secret) {
		t.Fatal("the list shows the secret again")
	}

	if p := b.post("/admin/webhooks/"+id+"/test", nil); p.code != 303 || !strings.HasSuffix(p.location, "done=webhook-tested") {
		t.Fatalf("test: %d %s", p.code, p.body)
	}
	poll.Until(t, poll.BusyMachine, func() error {
		if h, _ := rc.posts(); len(h) == 0 {
			return errors.New("nothing posted yet")
		}
		return nil
	})
	hs, bodies := rc.posts()
	if err := verify(secret, hs[0], bodies[0]); err != nil {
		t.Fatalf("the test event's signature: %v", err)
	}
	if !strings.Contains(string(bodies[0]), `"type":"webhook.test"`) || !strings.Contains(string(bodies[0]), `"endpoint":"`+id+`"`) {
		t.Fatalf("the test event: %s", bodies[0])
	}
	var ds []store.WebhookDelivery
	poll.Until(t, poll.BusyMachine, func() error {
		ds, _ = e.st.WebhookDeliveries(t.Context(), id)
		if len(ds) == 0 {
			return errors.New("no delivery logged yet")
		}
		return nil
	})
	if !ds[0].OK || ds[0].Status != 204 || !ds[0].Test || ds[0].Event != hs[0].Get("webhook-id") {
		t.Fatalf("logged: %+v", ds[0])
	}
	mustContain(t, "deliveries", b.get("/admin/webhooks"), "webhook.test", "delivered", "<td>204</td>")

	if p := b.post("/admin/webhooks/"+id+"/disable", nil); p.code != 303 {
		t.Fatalf("disable: %d", p.code)
	}
	mustContain(t, "disabled", b.get("/admin/webhooks"), `badge disabled`, ">Enable<")
	if p := b.post("/admin/webhooks/"+id+"/test", nil); p.code != 409 {
		t.Fatalf("test while disabled: %d", p.code)
	}
	if p := b.post("/admin/webhooks/"+id+"/enable", nil); p.code != 303 {
		t.Fatalf("enable: %d", p.code)
	}
	if p := b.post("/admin/webhooks/"+id+"/delete", nil); p.code != 303 {
		t.Fatalf("remove: %d", p.code)
	}
	if list, _ := e.st.ListWebhooks(t.Context()); len(list) != 0 {
		t.Fatalf("left: %+v", list)
	}
	if p := b.postFrom("cross-site", "/admin/webhooks", url.Values{"url": {hook.URL}, "events": {"issue.sent"}}); p.code != 403 {
		t.Fatalf("a cross-site form: %d", p.code)
	}
	want := []string{"alice webhook.removed", "alice webhook.enabled", "alice webhook.disabled", "alice webhook.tested", "alice webhook.added"}
	if got := e.audit.actions(); strings.Join(changes(got)[:5], ";") != strings.Join(want, ";") {
		t.Fatalf("audit: %v", got)
	}
	ed := e.signedIn(t, editorToken)
	if p := ed.get("/admin/webhooks"); p.code != 403 {
		t.Fatalf("an editor's webhooks page: %d", p.code)
	}
}

// TestItemEditDeleteAndDigestRun: an item is edited (checked as a new
// one) and deleted from its page; this week's digest is queued once, a
// second press says so.
func TestItemEditDeleteAndDigestRun(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, adminToken)
	it, err := e.st.AddItem(t.Context(), store.Item{Title: "A post", URL: "https://example.com/a"})
	if err != nil {
		t.Fatal(err)
	}
	path := "/admin/items/" + itoa(it.ID)
	mustContain(t, "items", b.get("/admin/items"), `href="`+path+`"`, "Run this week")
	mustContain(t, "item", b.get(path), `value="A post"`, "Delete the item")
	if p := b.post(path, url.Values{"title": {"A post"}, "url": {"javascript:alert(1)"}}); p.code != 400 {
		t.Fatalf("bad edit: %d", p.code)
	}
	if p := b.post(path, url.Values{"title": {"A better post"}, "url": {"https://example.com/b"}}); p.code != 303 || !strings.Contains(p.location, "item-saved") {
		t.Fatalf("edit: %d %s", p.code, p.body)
	}
	if got, _ := e.st.Item(t.Context(), it.ID); got.Title != "A better post" || got.URL != "https://example.com/b" {
		t.Fatalf("stored: %+v", got)
	}
	if p := b.post(path+"/delete", nil); p.code != 303 {
		t.Fatalf("delete: %d", p.code)
	}
	if p := b.get(path); p.code != 404 {
		t.Fatalf("the deleted item's page: %d", p.code)
	}
	p := b.post("/admin/digest/run", nil)
	if p.code != 303 || !strings.HasSuffix(p.location, "done=digest-queued") {
		t.Fatalf("run: %d %q", p.code, p.location)
	}
	mustContain(t, "queued", b.get(p.location), "is queued")
	if p := b.post("/admin/digest/run", nil); p.code != 303 || !strings.HasSuffix(p.location, "done=digest-already") {
		t.Fatalf("second run: %d %q", p.code, p.location)
	}
	ed := e.signedIn(t, editorToken)
	if p := ed.post("/admin/digest/run", nil); p.code != 403 {
		t.Fatalf("an editor runs the digest: %d", p.code)
	}
	want := []string{"alice digest.run", "alice digest.run", "alice item.deleted", "alice item.updated"}
	if got := e.audit.actions(); strings.Join(changes(got)[:4], ";") != strings.Join(want, ";") {
		t.Fatalf("audit: %v", got)
	}
}

// TestIssueDuplicateVersionsDelete: the editor's comforts in the
// console: Reply-To kept, versions listed and one restored (a stale page
// refused), a copy made, a draft deleted (a cancelled issue not), the
// previews at full width, as a phone and as text.
func TestIssueDuplicateVersionsDelete(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, editorToken)
	draft := url.Values{"subject": {"April"}, "body": {"first"}, "topics": {"digest"}, "reply_to": {"bad address"}}
	if p := b.post("/admin/issues", draft); p.code != 400 || !strings.Contains(p.body, "reply_to") {
		t.Fatalf("bad reply-to: %d", p.code)
	}
	draft.Set("reply_to", "Letters@Example.com")
	p := b.post("/admin/issues", draft)
	m := issueIDRe.FindStringSubmatch(p.location)
	if p.code != 303 || m == nil {
		t.Fatalf("create: %d %q", p.code, p.location)
	}
	id := mustID(t, m[1])
	path := "/admin/issues/" + m[1]
	mustContain(t, "editor", b.get(path), `value="letters@example.com"`, "/versions", "Duplicate", `href="`+path+`/delete">Delete…`)
	for v, body := range []string{"second", "third"} {
		draft.Set("body", body)
		draft.Set("version", itoa(int64(v+1)))
		if p := b.post(path, draft); p.code != 303 {
			t.Fatalf("save %s: %d %s", body, p.code, p.body)
		}
	}
	mustContain(t, "versions", b.get(path+"/versions"), "at version 3", "<td>2</td>", "<td>1</td>", "second", "first",
		`action="`+path+`/versions/1/restore"`, `name="version" value="3"`)
	if p := b.post(path+"/versions/1/restore", url.Values{"version": {"2"}}); p.code != 409 {
		t.Fatalf("stale restore: %d", p.code)
	}
	if is, _ := e.st.Issue(t.Context(), id); is.Body != "third" || is.Version != 3 {
		t.Fatalf("a stale restore changed it: %+v", is)
	}
	if p := b.post(path+"/versions/1/restore", url.Values{"version": {"3"}}); p.code != 303 || !strings.HasSuffix(p.location, "done=version-restored") {
		t.Fatalf("restore: %d %s", p.code, p.body)
	}
	if is, _ := e.st.Issue(t.Context(), id); is.Body != "first" || is.Version != 4 || is.ReplyTo != "letters@example.com" {
		t.Fatalf("restored: %+v", is)
	}

	for as, want := range map[string]string{"html": `data-preview="html"`, "phone": `width:375px`, "text": `data-preview="text"`} {
		mustContain(t, "preview "+as, b.get(path+"/preview?as="+as), want)
	}

	p = b.post(path+"/duplicate", nil)
	dm := regexp.MustCompile(`^/admin/issues/(\d+)\?done=duplicated$`).FindStringSubmatch(p.location)
	if p.code != 303 || dm == nil {
		t.Fatalf("duplicate: %d %q", p.code, p.location)
	}
	dup, _ := e.st.Issue(t.Context(), mustID(t, dm[1]))
	if dup.Subject != "April (copy)" || dup.Body != "first" || dup.ReplyTo != "letters@example.com" || dup.Status != store.IssueDraft {
		t.Fatalf("copy: %+v", dup)
	}
	// A delete moves the copy to the trash (issue #46; it destroyed a
	// draft before): its page says so and offers it back.
	if p := b.post("/admin/issues/"+dm[1]+"/delete", nil); p.code != 303 || p.location != "/admin/issues?undo="+dm[1]+"&done=trashed" {
		t.Fatalf("delete: %d %q", p.code, p.location)
	}
	mustContain(t, "the deleted draft", b.get("/admin/issues/"+dm[1]), "This issue is in the trash", `action="/admin/issues/`+dm[1]+`/restore"`)
	if p := b.post(path+"/cancel", nil); p.code != 303 {
		t.Fatalf("cancel: %d", p.code)
	}
	if p := b.post(path+"/delete", nil); p.code != 409 {
		t.Fatalf("delete a cancelled issue: %d", p.code)
	}
	want := []string{"ed issue.cancelled", "ed issue.deleted", "ed issue.duplicated", "ed issue.restored"}
	if got := e.audit.actions(); strings.Join(changes(got)[:4], ";") != strings.Join(want, ";") {
		t.Fatalf("audit: %v", got)
	}
	v := e.signedIn(t, viewerToken)
	if p := v.post(path+"/duplicate", nil); p.code != 403 {
		t.Fatalf("a viewer duplicates: %d", p.code)
	}
}

// changes are the audit's actions without the sign-ins.
func changes(actions []string) []string {
	var out []string
	for _, a := range actions {
		if !strings.HasSuffix(a, " console.signed_in") {
			out = append(out, a)
		}
	}
	return out
}
