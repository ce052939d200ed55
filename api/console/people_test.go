package console_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// TestOverviewCountsAndChart: the overview counts people by status and
// topic from the store's figures and draws the 90-day chart.
func TestOverviewCountsAndChart(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		e.subscribe(t, fmt.Sprintf("on%d@example.com", i), "digest")
	}
	e.subscribe(t, "both@example.com", "digest", "updates")
	if err := e.st.MarkBounced(t.Context(), "on0@example.com"); err != nil {
		t.Fatal(err)
	}
	p := e.signedIn(t, viewerToken).get("/admin/")
	mustContain(t, "overview", p, `href="/admin/subscribers?status=active"><div class="n">3</div><div class="what">active</div>`,
		`href="/admin/subscribers?status=bounced"><div class="n">1</div>`,
		`<svg class="chart" viewBox="0 0 900 220" role="img"`, "Signups, confirmations and unsubscribes per day, last 90 days")
	// The digest's audience is the active ones with it on: 3 of the 4.
	if !regexp.MustCompile(`topic=digest"><div class="n">3</div>`).MatchString(p.body) {
		t.Fatalf("the digest tile:\n%s", p.body)
	}
}

// TestSubscriberListPagesByID: 50 a page, "Next" carries the last id and
// the filters, and the last page has none.
func TestSubscriberListPagesByID(t *testing.T) {
	e := newEnv(t)
	reqs := make([]store.SubscribeRequest, 60)
	for i := range reqs {
		topic := "digest"
		if i%10 == 0 {
			topic = "updates"
		}
		reqs[i] = store.SubscribeRequest{Email: fmt.Sprintf("p%02d@example.com", i), Activate: true, Topics: []string{topic}}
	}
	if _, err := e.st.SubscribeMany(t.Context(), reqs); err != nil {
		t.Fatal(err)
	}
	// The pages are in id order, which is not the order of signing up
	// (an id carries its shard): the highest id is on the second page,
	// the lowest on the first.
	lowest, highest := store.Subscriber{ID: math.MaxInt64}, store.Subscriber{}
	for _, r := range reqs {
		sub, err := e.st.Get(t.Context(), r.Email)
		if err != nil {
			t.Fatal(err)
		}
		if sub.ID < lowest.ID {
			lowest = sub
		}
		if sub.ID > highest.ID {
			highest = sub
		}
	}
	b := e.signedIn(t, viewerToken)
	first := b.get("/admin/subscribers?status=active")
	if first.code != 200 || strings.Count(first.body, `<tr><td class="num">`) != 50 {
		t.Fatalf("first page: %d, %d rows", first.code, strings.Count(first.body, `<tr><td class="num">`))
	}
	next := regexp.MustCompile(`<a href="(/admin/subscribers\?[^"]+)" rel="next">`).FindStringSubmatch(first.body)
	if next == nil {
		t.Fatal("no Next link on a full page")
	}
	link := strings.ReplaceAll(next[1], "&amp;", "&")
	if !strings.Contains(link, "status=active") || !strings.Contains(link, "after=") {
		t.Fatalf("next: %q", link)
	}
	second := b.get(link)
	if n := strings.Count(second.body, `<tr><td class="num">`); second.code != 200 || n != 10 || strings.Contains(second.body, `rel="next"`) {
		t.Fatalf("second page: %d, %d rows", second.code, n)
	}
	mustContain(t, "second page", second, highest.Email)
	if strings.Contains(second.body, ">"+lowest.Email+"<") {
		t.Fatal("the second page repeats the first")
	}
	byTopic := b.get("/admin/subscribers?topic=updates")
	if n := strings.Count(byTopic.body, `<tr><td class="num">`); n != 6 || !strings.Contains(byTopic.body, "p10@example.com") || strings.Contains(byTopic.body, "p11@example.com") {
		t.Fatalf("by topic: %d rows\n%s", n, byTopic.body)
	}
	if p := b.get("/admin/subscribers?status=bounced"); !strings.Contains(p.body, "Nobody here.") {
		t.Fatalf("nobody bounced: %s", p.body)
	}
}

// TestSubscriberListBadQuery: a status, topic or after the list cannot
// take is a 400 page that says which, with no list beside it.
func TestSubscriberListBadQuery(t *testing.T) {
	e := newEnv(t)
	e.subscribe(t, "zed@example.com", "digest")
	b := e.signedIn(t, viewerToken)
	for q, want := range map[string]string{
		"status=gone":  `unknown status &#34;gone&#34;`,
		"topic=sports": `unknown topic &#34;sports&#34;`,
		"after=-1":     "after: want the id",
		"after=ten":    "after: want the id",
		"limit=100000": "limit: want 1 to 500",
	} {
		p := b.get("/admin/subscribers?" + q)
		if p.code != http.StatusBadRequest || !strings.Contains(p.body, want) || strings.Contains(p.body, "zed@example.com") {
			t.Fatalf("%s: %d\n%s", q, p.code, p.body)
		}
	}
}

// TestSubscriberPageShowsTheirData: consent, mails sent, bounces and
// complaints, from the store's personal data.
func TestSubscriberPageShowsTheirData(t *testing.T) {
	e := newEnv(t)
	sub, err := e.st.Subscribe(t.Context(), store.SubscribeRequest{Email: "dora@example.com", Name: "Dora", Timezone: "Europe/Oslo",
		Activate: true, Topics: []string{"digest"}, Source: store.SourceForm})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.MarkSent(t.Context(), store.Mark{Kind: "issue", Key: "7", SubscriberID: sub.ID, Shared: true},
		store.Mark{Kind: tasks.FanoutMarkKind, Key: "issue:7", SubscriberID: sub.ID, Shared: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.RecordFeedback(t.Context(), store.Feedback{ID: "r1", Email: sub.Email, Type: store.SoftBounce}, store.FeedbackPolicy{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.RecordFeedback(t.Context(), store.Feedback{ID: "r2", Email: sub.Email, Type: store.Complaint}, store.FeedbackPolicy{}); err != nil {
		t.Fatal(err)
	}
	p := e.signedIn(t, viewerToken).get("/admin/subscribers/" + itoa(sub.ID))
	mustContain(t, "subscriber", p, "dora@example.com", "complained", "Dora", "Europe/Oslo", "the signup form",
		`<a href="/admin/issues/7">issue 7</a>`, `<a href="/admin/issues/7">notifications of issue 7 queued`, `<dd data-field="bounces">1</dd>`, `<dd data-field="complaints">1</dd>`,
		"soft bounce", "complaint (reported as spam)")
	// A viewer sees no actions.
	if strings.Contains(p.body, "/erase") || strings.Contains(p.body, "/export") {
		t.Fatal("a viewer is offered export or erase")
	}
}

// TestExportAndEraseAsTheAPIDoes: only an admin, only a same-site POST;
// erase asks first and a GET never erases; both are in the audit log
// by the address's keyed hash; afterwards the person is gone.
func TestExportAndEraseAsTheAPIDoes(t *testing.T) {
	e := newEnv(t)
	sub := e.subscribe(t, "erin@example.com", "digest")
	path := "/admin/subscribers/" + itoa(sub.ID)
	stillThere := func(step string) {
		t.Helper()
		if _, err := e.st.Get(t.Context(), sub.Email); err != nil {
			t.Fatalf("%s: erin is gone: %v", step, err)
		}
	}

	// Wrong roles: 403, nothing exported or erased, nothing recorded.
	for _, tok := range []string{viewerToken, editorToken} {
		b := e.signedIn(t, tok)
		for _, action := range []string{"/export", "/erase"} {
			p := b.post(path+action, url.Values{"confirm": {"erase"}})
			if p.code != http.StatusForbidden || strings.Contains(p.body, "erin@example.com") {
				t.Fatalf("%s %s: %d", tok, action, p.code)
			}
		}
	}
	stillThere("wrong roles")

	admin := e.signedIn(t, adminToken)
	// A form posted from another site: 403.
	for _, action := range []string{"/export", "/erase"} {
		if p := admin.postFrom("cross-site", path+action, url.Values{"confirm": {"erase"}}); p.code != http.StatusForbidden || strings.Contains(p.body, `"subscriber"`) {
			t.Fatalf("cross-site %s: %d", action, p.code)
		}
	}
	// GET never exports nor erases.
	for _, action := range []string{"/export", "/erase", "/erase?confirm=erase"} {
		if p := admin.get(path + action); p.code != http.StatusNotFound {
			t.Fatalf("GET %s: %d", action, p.code)
		}
	}
	// Erase asks first: without the word typed, the page again.
	for _, confirm := range []string{"", "yes", "ERASE "} {
		p := admin.post(path+"/erase", url.Values{"confirm": {confirm}})
		if p.code != http.StatusBadRequest || !strings.Contains(p.body, "type &#34;erase&#34; to confirm. Nothing was erased.") {
			t.Fatalf("erase with %q: %d\n%s", confirm, p.code, p.body)
		}
	}
	stillThere("unconfirmed")
	for _, a := range e.audit.actions() {
		if strings.Contains(a, "subscriber.") {
			t.Fatalf("a refused request was recorded: %v", e.audit.actions())
		}
	}

	// The export: the API's JSON, as a file.
	p := admin.post(path+"/export", nil)
	if p.code != 200 || p.header.Get("Content-Type") != "application/json" ||
		p.header.Get("Content-Disposition") != `attachment; filename="subscriber-`+itoa(sub.ID)+`.json"` || p.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("export: %d %v", p.code, p.header)
	}
	var data struct {
		ExportedAt string `json:"exported_at"`
		Subscriber struct {
			Email  string   `json:"email"`
			Topics []string `json:"topics"`
		} `json:"subscriber"`
		Consent json.RawMessage `json:"consent"`
		Mails   []any           `json:"mails_sent"`
	}
	if err := json.Unmarshal([]byte(p.body), &data); err != nil {
		t.Fatalf("export: %v\n%s", err, p.body)
	}
	if data.Subscriber.Email != "erin@example.com" || strings.Join(data.Subscriber.Topics, ",") != "digest" || data.ExportedAt == "" || data.Consent == nil || data.Mails == nil {
		t.Fatalf("export: %+v", data)
	}

	// The erase: back to the list with a notice; erin is gone.
	p = admin.post(path+"/erase", url.Values{"confirm": {"erase"}})
	if p.code != http.StatusSeeOther || p.location != "/admin/subscribers?done=erased" {
		t.Fatalf("erase: %d %q\n%s", p.code, p.location, p.body)
	}
	mustContain(t, "the list after", admin.get(p.location), "The person was erased")
	if _, err := e.st.Get(t.Context(), sub.Email); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("erin after the erase: %v", err)
	}
	if p := admin.post("/admin/subscribers/find", url.Values{"email": {"erin@example.com"}}); p.code != http.StatusNotFound {
		t.Fatalf("find after the erase: %d", p.code)
	}
	if p := admin.get(path); p.code != http.StatusNotFound {
		t.Fatalf("her page after the erase: %d", p.code)
	}

	entries := e.audit.entries()
	if len(entries) < 2 || entries[0].Action != "subscriber.erased" || entries[1].Action != "subscriber.exported" ||
		entries[0].Actor != "alice" || entries[0].Role != "admin" || entries[1].Actor != "alice" {
		t.Fatalf("audit: %v", e.audit.actions())
	}
	if tg := entries[0].Target; !strings.HasPrefix(tg, "subscriber:") || tg != entries[1].Target || strings.Contains(tg, "erin") {
		t.Fatalf("audit targets: %q %q", entries[0].Target, entries[1].Target)
	}
}
