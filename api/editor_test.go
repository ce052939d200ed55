package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/store"
)

// TestIssueEditorComforts: duplicate, versions and restore (a stale
// version refused, nothing changed), Reply-To checked and kept, delete
// of a draft only; each change audited.
func TestIssueEditorComforts(t *testing.T) {
	e := &issueEnv{mail: &fakeIssueMail{}}
	e.env = newEnvWith(t, Config{AdminToken: "s3cret"}, func(d *Deps) {
		e.st = d.Store.(*store.Redis)
		*d = d.WithIssues(e.st, e.mail)
		d.Audit = audit.NewTrail(e.st, logredact.New([]byte("editor-secret")), d.Log, nil)
	})
	ctx := context.Background()
	if code, out := e.do(t, "POST", "/api/issues", `{"subject":"S","body":"b","topics":["digest"],"reply_to":"Not an address"}`); code != 400 || !strings.Contains(out, "reply_to") {
		t.Fatalf("bad reply_to: %d %s", code, out)
	}
	id := e.create(t, `{"subject":"Spring","body":"one","topics":["digest"],"reply_to":" Editor@Example.com "}`)
	path := "/api/issues/" + editorID(id)
	is, _ := e.st.Issue(ctx, id)
	if is.ReplyTo != "editor@example.com" {
		t.Fatalf("reply_to kept as %q", is.ReplyTo)
	}
	for i, body := range []string{"two", "three"} {
		if code, out := e.do(t, "PUT", path, `{"subject":"Spring","body":"`+body+`","topics":["digest"],"version":`+editorID(int64(i+1))+`}`); code != 200 {
			t.Fatalf("save %s: %d %s", body, code, out)
		}
	}
	code, out := e.do(t, "GET", path+"/versions", "")
	var vs struct {
		Version  int
		Versions []store.IssueVersion
	}
	if code != 200 || json.Unmarshal([]byte(out), &vs) != nil || vs.Version != 3 || len(vs.Versions) != 2 ||
		vs.Versions[0].Version != 2 || vs.Versions[0].Body != "two" || vs.Versions[1].Version != 1 || vs.Versions[1].Body != "one" {
		t.Fatalf("versions: %d %s", code, out)
	}
	// A restore from a page that showed version 2: refused, nothing changed.
	if code, out := e.do(t, "POST", path+"/versions/1/restore", `{"version":2}`); code != 409 {
		t.Fatalf("stale restore: %d %s", code, out)
	}
	if got, _ := e.st.Issue(ctx, id); got.Version != 3 || got.Body != "three" {
		t.Fatalf("a stale restore changed the issue: %+v", got)
	}
	if code, out := e.do(t, "POST", path+"/versions/9/restore", `{"version":3}`); code != 404 {
		t.Fatalf("restore of no version: %d %s", code, out)
	}
	if code, out := e.do(t, "POST", path+"/versions/1/restore", `{"version":3}`); code != 200 || !strings.Contains(out, `"version":4`) {
		t.Fatalf("restore: %d %s", code, out)
	}
	got, _ := e.st.Issue(ctx, id)
	if got.Body != "one" || got.Version != 4 || got.ReplyTo != "editor@example.com" {
		t.Fatalf("restored: %+v", got)
	}
	if all, _ := e.st.IssueVersions(ctx, id); len(all) != 3 || all[2].Body != "three" {
		t.Fatalf("the restore lost the version before it: %+v", all)
	}

	code, out = e.do(t, "POST", path+"/duplicate", "")
	var dup store.Issue
	if code != 201 || json.Unmarshal([]byte(out), &dup) != nil || dup.ID == id || dup.Subject != "Spring (copy)" ||
		dup.Body != "one" || dup.Status != store.IssueDraft || dup.ReplyTo != "editor@example.com" || dup.Slug != "spring-copy" {
		t.Fatalf("duplicate: %d %s", code, out)
	}
	if code, out := e.do(t, "DELETE", "/api/issues/"+editorID(dup.ID), ""); code != 204 {
		t.Fatalf("delete the copy: %d %s", code, out)
	}
	// A delete moves the draft to the trash (issue #46): it is still
	// there to restore (issue_trash_test.go), no longer destroyed.
	if code, out := e.do(t, "GET", "/api/issues/"+editorID(dup.ID), ""); code != 200 || !strings.Contains(out, `"status":"trashed"`) {
		t.Fatalf("the deleted draft: %d %s", code, out)
	}
	if _, err := e.st.TransitionIssue(ctx, id, []string{store.IssueDraft}, store.IssueCancelled, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	if code, out := e.do(t, "DELETE", path, ""); code != 409 || !strings.Contains(out, "cancelled") {
		t.Fatalf("delete a cancelled issue: %d %s", code, out)
	}
	if code, out := e.do(t, "POST", path+"/versions/1/restore", `{"version":4}`); code != 409 {
		t.Fatalf("restore into a cancelled issue: %d %s", code, out)
	}
	var actions []string
	entries, _ := e.st.AuditEntries(ctx, "", 20)
	for _, en := range entries {
		actions = append(actions, en.Action)
	}
	if want := "issue.deleted issue.duplicated issue.restored issue.updated issue.updated issue.created"; strings.Join(actions, " ") != want {
		t.Fatalf("audit: %v, want %s", actions, want)
	}
}

// TestItemEditAndDelete: PUT checks as POST does; DELETE removes; both
// 404 for no item, audited.
func TestItemEditAndDelete(t *testing.T) {
	e := newEnv(t, Config{AdminToken: "s3cret"})
	ctx := context.Background()
	code, m := e.admin(t, "POST", "/api/items", `{"title":"Release","url":"https://example.com/r"}`)
	if code != 201 {
		t.Fatalf("add: %d %v", code, m)
	}
	id := int64(m["id"].(float64))
	path := "/api/items/" + editorID(id)
	if code, m := e.admin(t, "PUT", path, `{"title":"","url":"https://example.com/r"}`); code != 400 {
		t.Fatalf("bad edit: %d %v", code, m)
	}
	if code, m := e.admin(t, "PUT", path, `{"title":"Release 2","url":"https://example.com/r2","summary":"now"}`); code != 200 || m["title"] != "Release 2" || m["topic"] != "digest" {
		t.Fatalf("edit: %d %v", code, m)
	}
	if it, _ := e.store.Item(ctx, id); it.URL != "https://example.com/r2" || it.Summary != "now" {
		t.Fatalf("stored: %+v", it)
	}
	if code, _ := e.admin(t, "DELETE", path, ""); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	for _, method := range []string{"PUT", "DELETE"} {
		if code, _ := e.admin(t, method, path, `{"title":"x","url":"https://example.com"}`); code != 404 {
			t.Fatalf("%s of a deleted item: %d", method, code)
		}
	}
	if list, _ := e.store.ItemsAfter(ctx, "digest", 0, 10); len(list) != 0 {
		t.Fatalf("items left: %+v", list)
	}
}

// TestWebhookDisableTestAndDeliveries: disable and enable; a test event
// is one task marked test for that endpoint alone (refused while
// disabled); the deliveries route answers the endpoint's log.
func TestWebhookDisableTestAndDeliveries(t *testing.T) {
	e := newHooksEnv(t, Config{})
	code, body := e.hookAdmin(t, "POST", "/api/webhooks", `{"url":"https://8.8.8.8/crm","events":["issue.sent"]}`)
	if code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	id := e.hooks(t)[0].ID
	if code, body := e.hookAdmin(t, "POST", "/api/webhooks/"+id+"/disable", ""); code != 200 || !strings.Contains(body, `"state":"disabled"`) {
		t.Fatalf("disable: %d %s", code, body)
	}
	if code, body := e.hookAdmin(t, "POST", "/api/webhooks/"+id+"/test", ""); code != 409 {
		t.Fatalf("test a disabled endpoint: %d %s", code, body)
	}
	if code, body := e.hookAdmin(t, "POST", "/api/webhooks/"+id+"/enable", ""); code != 200 {
		t.Fatalf("enable: %d %s", code, body)
	}
	if code, body := e.hookAdmin(t, "POST", "/api/webhooks/wh_none/test", ""); code != 404 {
		t.Fatalf("test no endpoint: %d %s", code, body)
	}
	code, body = e.hookAdmin(t, "POST", "/api/webhooks/"+id+"/test", "")
	var ans struct{ Event, Type string }
	if code != 202 || json.Unmarshal([]byte(body), &ans) != nil || ans.Type != "webhook.test" {
		t.Fatalf("test: %d %s", code, body)
	}
	got := e.webhookTasks(t)
	if len(got) != 1 || got[0].Endpoint != id || got[0].ID != ans.Event || !got[0].Test || !strings.Contains(got[0].Body, `"test":true`) {
		t.Fatalf("queued: %+v", got)
	}
	if err := e.store.RecordWebhookDelivery(context.Background(), id, store.WebhookDelivery{Event: ans.Event, Type: "webhook.test", Test: true, OK: true, Status: 204}); err != nil {
		t.Fatal(err)
	}
	code, body = e.hookAdmin(t, "GET", "/api/webhooks/"+id+"/deliveries", "")
	var log struct{ Deliveries []store.WebhookDelivery }
	if code != 200 || json.Unmarshal([]byte(body), &log) != nil || len(log.Deliveries) != 1 || log.Deliveries[0].Status != 204 || !log.Deliveries[0].Test {
		t.Fatalf("deliveries: %d %s", code, body)
	}
	if code, _ := e.hookAdmin(t, "GET", "/api/webhooks/wh_none/deliveries", ""); code != 404 {
		t.Fatalf("deliveries of no endpoint: %d", code)
	}
}

func editorID(n int64) string { return strconv.FormatInt(n, 10) }
