package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

func TestAddSubscriber(t *testing.T) {
	e, _ := newJobsEnv(t)
	ctx := context.Background()
	// Without double opt-in: active at once, the reason and actor kept.
	code, body := e.adminRaw2(t, "POST", "/api/subscribers", `{"email":"Hand@Example.com","name":"Ann \"the hand\" Lee","timezone":"Europe/Berlin","topics":["updates"],"double_optin":false,"reason":"asked at the fair"}`)
	if code != http.StatusCreated || !strings.Contains(body, `"status":"active"`) {
		t.Fatalf("add: %d %s", code, body)
	}
	pd, err := e.store.PersonalData(ctx, "hand@example.com")
	if err != nil || pd.Consent.Source != store.SourceAdmin || pd.Consent.Reason != "asked at the fair" || pd.Consent.Actor != "admin-token" ||
		pd.Subscriber.Name != `Ann "the hand" Lee` || !slices.Equal(pd.Subscriber.Topics, []string{"updates"}) {
		t.Fatalf("stored: %+v %v", pd, err)
	}
	if n := e.taskCount(t, tasks.WelcomeEmail.Queue); n == 0 {
		t.Fatal("no welcome queued")
	}
	// With double opt-in: pending, a confirmation queued.
	code, body = e.adminRaw2(t, "POST", "/api/subscribers", `{"email":"opt@example.com","double_optin":true}`)
	if code != http.StatusCreated || !strings.Contains(body, `"status":"pending"`) {
		t.Fatalf("add with double opt-in: %d %s", code, body)
	}
	if n := e.taskCount(t, tasks.ConfirmEmail.Queue); n != 1 {
		t.Fatalf("%d confirmations queued", n)
	}
	// The refusals: nothing changes.
	must2(t)(e.store.Subscribe(ctx, store.SubscribeRequest{Email: "gone@example.com", Activate: true}))
	must2(t)(e.store.Erase(ctx, "gone@example.com"))
	must2(t)(e.store.Subscribe(ctx, store.SubscribeRequest{Email: "bounced@example.com", Activate: true}))
	if err := e.store.MarkBounced(ctx, "bounced@example.com"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		body, want string
		code       int
	}{
		{`{"email":"no-reason@example.com"}`, "reason: required", 400},
		{`{"email":"not an address","double_optin":true}`, "email", 400},
		{`{"email":"t@example.com","double_optin":true,"topics":["nope"]}`, "unknown topic", 400},
		{`{"email":"t@example.com","double_optin":true,"timezone":"Mars/Base"}`, "unknown time zone", 400},
		{`{"email":"t@example.com","double_optin":true,"name":"a\u0007b"}`, "name", 400},
		{`{"email":"t@example.com","double_optin":true,"tags":["Not A Tag"]}`, "tags", 400},
		{`{"email":"t@example.com","double_optin":true,"fields":{"nope":"x"}}`, "is declared", 400},
		{`{"email":"t@example.com","double_optin":true,"colour":"red"}`, "unknown field", 400},
		{`{"email":"t@example.com","reason":"line\nbreak"}`, "reason", 400},
		{`{"email":"hand@example.com","reason":"again"}`, "already on the list", 409},
		{`{"email":"gone@example.com","reason":"again"}`, "erased at their own request", 409},
		{`{"email":"bounced@example.com","reason":"again"}`, "suppressed (bounced)", 409},
	} {
		code, body := e.adminRaw2(t, "POST", "/api/subscribers", c.body)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %d %q", c.body, code, body, c.code, c.want)
		}
	}
	if _, err := e.store.Get(ctx, "t@example.com"); err == nil {
		t.Fatal("a refused addition wrote someone")
	}
	entries, _ := e.store.AuditEntries(ctx, "", 10)
	if len(entries) != 2 || entries[1].Action != AuditSubscriberAdded || !strings.Contains(entries[1].Detail, "asked at the fair") {
		t.Fatalf("audit: %+v", entries)
	}
}

func TestPatchSubscriber(t *testing.T) {
	e, _ := newJobsEnv(t)
	ctx := context.Background()
	must2(t)(e.store.Subscribe(ctx, store.SubscribeRequest{Email: "p@example.com", Name: "Old", Activate: true}))
	for _, d := range []store.FieldDef{{Name: "seats", Type: store.FieldNumber}, {Name: "company", Type: store.FieldText}} {
		must2(t)(e.store.DefineField(ctx, d))
	}
	code, body := e.adminRaw2(t, "PATCH", "/api/subscribers/p@example.com", `{"name":"O'Brien \"Bob\"","timezone":"Asia/Tokyo","topics":["updates"]}`)
	if code != 200 {
		t.Fatalf("patch: %d %s", code, body)
	}
	got, _ := e.store.Get(ctx, "p@example.com")
	if got.Name != `O'Brien "Bob"` || got.Timezone != "Asia/Tokyo" || !slices.Equal(got.Topics, []string{"updates"}) {
		t.Fatalf("after the patch: %+v", got)
	}
	// Found by the new name, not the old.
	if _, b := e.adminRaw2(t, "GET", "/api/subscribers?q=bob", ""); !strings.Contains(b, "p@example.com") {
		t.Fatalf("search bob: %s", b)
	}
	if _, b := e.adminRaw2(t, "GET", "/api/subscribers?q=old", ""); strings.Contains(b, "p@example.com") {
		t.Fatalf("search old: %s", b)
	}
	for _, c := range []struct {
		path, body, want string
		code             int
	}{
		{"/api/subscribers/p@example.com", `{"name":"a\u0000b"}`, "name", 400},
		{"/api/subscribers/p@example.com", `{"topics":[]}`, "at least one", 400},
		{"/api/subscribers/p@example.com", `{"timezone":"Nowhere/Land"}`, "time zone", 400},
		{"/api/subscribers/p@example.com", `{}`, "nothing to change", 400},
		{"/api/subscribers/p@example.com", `{"fields":{"a":"b"}}`, "is declared", 400},
		{"/api/subscribers/p@example.com", `{"fields":{"seats":"many"}}`, "not a number", 400},
		{"/api/subscribers/p@example.com", `{"tags":["ok","Bad Tag"]}`, "tags", 400},
		{"/api/subscribers/nobody@example.com", `{"name":"X"}`, "no such subscriber", 404},
	} {
		code, body := e.adminRaw2(t, "PATCH", c.path, c.body)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s, want %d %q", c.path, c.body, code, body, c.code, c.want)
		}
	}
	if after, _ := e.store.Get(ctx, "p@example.com"); after.Name != got.Name || after.Timezone != got.Timezone || len(after.Tags) != 0 || len(after.Fields) != 0 {
		t.Fatalf("a refused change changed: %+v", after)
	}
	// Tags replace the person's; fields merge into theirs, "" clears one.
	if code, body := e.adminRaw2(t, "PATCH", "/api/subscribers/p@example.com", `{"tags":["beta","vip"],"fields":{"seats":"12","company":"Acme"}}`); code != 200 {
		t.Fatalf("tags and fields: %d %s", code, body)
	}
	if code, body := e.adminRaw2(t, "PATCH", "/api/subscribers/p@example.com", `{"tags":["vip","paid"],"fields":{"company":""}}`); code != 200 ||
		!strings.Contains(body, `"tags":["paid","vip"]`) {
		t.Fatalf("tags and fields again: %d %s", code, body)
	}
	if after, _ := e.store.Get(ctx, "p@example.com"); !slices.Equal(after.Tags, []string{"paid", "vip"}) || len(after.Fields) != 1 || after.Fields["seats"] != "12" {
		t.Fatalf("tags %v, fields %v: want paid, vip and seats 12 only", after.Tags, after.Fields)
	}
	if n, err := e.store.SegmentCount(ctx, "tag:paid AND NOT tag:beta AND field.seats > 10"); err != nil || n.Matching != 1 {
		t.Fatalf("the segment sees the changed tags and fields: %+v %v", n, err)
	}
	must2(t)(e.store.Unsubscribe(ctx, "p@example.com"))
	if code, body := e.adminRaw2(t, "PATCH", "/api/subscribers/p@example.com", `{"topics":["digest"]}`); code != 409 {
		t.Fatalf("topics of an ended subscription: %d %s", code, body)
	}
}

func TestSearchAndPagesBothWays(t *testing.T) {
	e, _ := newJobsEnv(t)
	ctx := context.Background()
	for i := range 9 {
		must2(t)(e.store.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("s%d@example.com", i), Name: "Sam Smith", Activate: true}))
	}
	type page struct {
		Subscribers []struct{ Email string }
		Next, Prev  string
		Total       *int64
	}
	get := func(query string) page {
		t.Helper()
		code, body := e.adminRaw2(t, "GET", "/api/subscribers?"+query, "")
		if code != 200 {
			t.Fatalf("%s: %d %s", query, code, body)
		}
		var p page
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p1 := get("q=SMI&limit=4")
	if len(p1.Subscribers) != 4 || p1.Total == nil || *p1.Total != 9 || p1.Prev != "" || p1.Next == "" {
		t.Fatalf("page 1: %+v", p1)
	}
	p2 := get("q=smi&limit=4&after=" + url.QueryEscape(p1.Next))
	back := get("q=smi&limit=4&before=" + url.QueryEscape(p2.Prev))
	if len(back.Subscribers) != 4 || back.Subscribers[0] != p1.Subscribers[0] || back.Prev != "" {
		t.Fatalf("back from page 2: %+v, page 1 %+v", back, p1)
	}
	// The list by id: total and the way back.
	type idPage struct {
		Subscribers []struct{ ID int64 }
		Next, Prev  int64
		Total       int64
	}
	var l1, l2, lb idPage
	_, b := e.adminRaw2(t, "GET", "/api/subscribers?limit=4", "")
	must(t, json.Unmarshal([]byte(b), &l1))
	_, b = e.adminRaw2(t, "GET", fmt.Sprintf("/api/subscribers?limit=4&after=%d", l1.Next), "")
	must(t, json.Unmarshal([]byte(b), &l2))
	_, b = e.adminRaw2(t, "GET", fmt.Sprintf("/api/subscribers?limit=4&before=%d", l2.Prev), "")
	must(t, json.Unmarshal([]byte(b), &lb))
	if l1.Total != 9 || l2.Prev == 0 || !slices.Equal(lb.Subscribers, l1.Subscribers) || lb.Prev != 0 {
		t.Fatalf("pages by id: %+v %+v back %+v", l1, l2, lb)
	}
	if code, _ := e.adminRaw2(t, "GET", "/api/subscribers?q=s&after=zzz", ""); code != 400 {
		t.Fatalf("a foreign cursor: %d", code)
	}
}

func TestBulkAndExport(t *testing.T) {
	e, runner := newJobsEnv(t)
	ctx := context.Background()
	for i := range 6 {
		must2(t)(e.store.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("k%d@example.com", i), Topics: []string{"digest"}, Activate: true}))
	}
	// By addresses: at once.
	code, body := e.adminRaw2(t, "POST", "/api/subscribers/bulk", `{"emails":["k0@example.com","K1@example.com","nobody@example.com"],"action":"add_topic","topic":"updates"}`)
	if code != 200 || !strings.Contains(body, `"changed":2`) || !strings.Contains(body, "nobody@example.com") {
		t.Fatalf("bulk by addresses: %d %s", code, body)
	}
	// An erasure asked once answers the count and erases nobody.
	code, body = e.adminRaw2(t, "POST", "/api/subscribers/bulk", `{"filter":{"topic":"updates"},"action":"erase"}`)
	if code != 409 || !strings.Contains(body, `"count":2`) || !strings.Contains(body, `"confirm_required":true`) {
		t.Fatalf("erase asked once: %d %s", code, body)
	}
	if code, body = e.adminRaw2(t, "POST", "/api/subscribers/bulk", `{"filter":{"topic":"updates"},"action":"erase","confirm":3}`); code != 409 {
		t.Fatalf("erase with the wrong count: %d %s", code, body)
	}
	if _, err := e.store.Get(ctx, "k0@example.com"); err != nil {
		t.Fatal("erased before the confirmation")
	}
	code, body = e.adminRaw2(t, "POST", "/api/subscribers/bulk", `{"filter":{"topic":"updates"},"action":"erase","confirm":2}`)
	var res subscribers.BulkResult
	if code != 202 || json.Unmarshal([]byte(body), &res) != nil || res.Job == nil {
		t.Fatalf("erase confirmed: %d %s", code, body)
	}
	if err := runner.Run(ctx, res.Job.ID); err != nil {
		t.Fatal(err)
	}
	if _, b := e.adminRaw2(t, "GET", "/api/bulk/"+res.Job.ID, ""); !strings.Contains(b, `"state":"done"`) || !strings.Contains(b, `"changed":2`) {
		t.Fatalf("bulk job: %s", b)
	}
	if _, err := e.store.Get(ctx, "k1@example.com"); err == nil {
		t.Fatal("not erased")
	}
	for _, bad := range []string{`{"action":"explode","emails":["a@example.com"]}`, `{"action":"add_topic","emails":["a@example.com"]}`,
		`{"action":"unsubscribe"}`, `{"action":"unsubscribe","filter":{"status":"sleepy"}}`} {
		if code, body := e.adminRaw2(t, "POST", "/api/subscribers/bulk", bad); code != 400 {
			t.Errorf("%s: %d %s", bad, code, body)
		}
	}

	// The export: 202 with progress, then the CSV.
	code, body = e.adminRaw2(t, "POST", "/api/exports", `{"status":"active"}`)
	var job listjobs.Job
	if code != 202 || json.Unmarshal([]byte(body), &job) != nil || job.ID == "" || job.Total != 4 {
		t.Fatalf("export: %d %s", code, body)
	}
	if code, body := e.adminRaw2(t, "GET", "/api/exports/"+job.ID, ""); code != 202 || !strings.Contains(body, `"state":"running"`) {
		t.Fatalf("export before it ran: %d %s", code, body)
	}
	if err := runner.Run(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/api/exports/"+job.ID, nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	csvBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment;") || strings.Count(string(csvBody), "\n") != 5 ||
		!strings.HasPrefix(string(csvBody), "email,name,timezone,topics,tags,status") {
		t.Fatalf("export: %d %v\n%s", resp.StatusCode, resp.Header, csvBody)
	}
	if code, _ := e.adminRaw2(t, "GET", "/api/exports/feedface", ""); code != 404 {
		t.Fatalf("unknown export: %d", code)
	}
	if code, body := e.adminRaw2(t, "POST", "/api/exports", `{"topic":"nope"}`); code != 400 {
		t.Fatalf("export with a bad filter: %d %s", code, body)
	}
}

// newJobsEnv is an API with an audit trail, and the runner a worker
// would use on its list jobs.
func newJobsEnv(t *testing.T) (*env, *listjobs.Runner) {
	t.Helper()
	var runner *listjobs.Runner
	e := newEnvWith(t, Config{AdminToken: "s3cret"}, func(d *Deps) {
		rs := d.Store.(*store.Redis)
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		d.Audit = audit.NewTrail(rs, logredact.New([]byte("list-secret")), log, nil)
		runner = &listjobs.Runner{Jobs: d.ListJobs, Store: rs, Audit: d.Audit, Now: time.Now, Log: log,
			Applier: &listjobs.Applier{Store: rs, Topics: topics.Default(0), Tasks: d.Tasks}}
	})
	return e, runner
}

// adminRaw2 sends body (JSON) with the admin token of newJobsEnv.
func (e *env) adminRaw2(t *testing.T, method, path, body string) (int, string) {
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

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Tags in bulk: added to the people picked (whatever their status: a tag
// describes the person), once however often; removed again; a name that
// is no tag is refused and changes nothing.
func TestBulkTags(t *testing.T) {
	e, _ := newJobsEnv(t)
	ctx := context.Background()
	must2(t)(e.store.Subscribe(ctx, store.SubscribeRequest{Email: "t1@example.com", Activate: true}))
	must2(t)(e.store.Subscribe(ctx, store.SubscribeRequest{Email: "t2@example.com", Activate: true}))
	must2(t)(e.store.Unsubscribe(ctx, "t2@example.com"))
	bulk := `{"emails":["t1@example.com","t2@example.com","nobody@example.com"],"action":"add_tag","tag":"beta"}`
	for round, want := range []string{`"changed":2,"skipped":0`, `"changed":0,"skipped":2`} {
		if code, body := e.adminRaw2(t, "POST", "/api/subscribers/bulk", bulk); code != 200 || !strings.Contains(body, want) || !strings.Contains(body, "nobody@example.com") {
			t.Fatalf("add_tag, round %d: %d %s, want %s", round, code, body, want)
		}
	}
	for _, email := range []string{"t1@example.com", "t2@example.com"} {
		if got, _ := e.store.Get(ctx, email); !slices.Equal(got.Tags, []string{"beta"}) {
			t.Fatalf("%s: tags %v", email, got.Tags)
		}
	}
	if code, body := e.adminRaw2(t, "POST", "/api/subscribers/bulk", `{"emails":["t1@example.com"],"action":"add_tag","tag":"Not a tag"}`); code != 400 {
		t.Fatalf("a bad tag: %d %s", code, body)
	}
	if code, body := e.adminRaw2(t, "POST", "/api/subscribers/bulk", `{"emails":["t1@example.com"],"action":"remove_tag","tag":"beta"}`); code != 200 || !strings.Contains(body, `"changed":1`) {
		t.Fatalf("remove_tag: %d %s", code, body)
	}
	if got, _ := e.store.Get(ctx, "t1@example.com"); len(got.Tags) != 0 {
		t.Fatalf("t1 tags after remove: %v", got.Tags)
	}
	if n, err := e.store.SegmentCount(ctx, "tag:beta"); err != nil || n.Matching != 1 {
		t.Fatalf("tag:beta after the bulk: %+v %v", n, err)
	}
}

// An erasure of nobody is refused (a job capped at 0 would cap nothing),
// and one by a search is confirmed by the people it finds, not by the
// search index's entries (a person found by address and by name counts
// once).
func TestBulkEraseCountsPeople(t *testing.T) {
	e, _ := newJobsEnv(t)
	ctx := context.Background()
	must2(t)(e.store.Subscribe(ctx, store.SubscribeRequest{Email: "zed@example.com", Name: "Zed Zedson", Activate: true}))
	if code, body := e.adminRaw2(t, "POST", "/api/subscribers/bulk", `{"filter":{"q":"nobody-here"},"action":"erase","confirm":0}`); code != 400 || !strings.Contains(body, "nobody to erase") {
		t.Fatalf("erase of nobody: %d %s", code, body)
	}
	code, body := e.adminRaw2(t, "POST", "/api/subscribers/bulk", `{"filter":{"q":"zed"},"action":"erase"}`)
	if code != 409 || !strings.Contains(body, `"count":1`) {
		t.Fatalf("erase by a search: %d %s, want the one person to confirm", code, body)
	}
	if _, err := e.store.Get(ctx, "zed@example.com"); err != nil {
		t.Fatalf("an unconfirmed erasure erased: %v", err)
	}
}
