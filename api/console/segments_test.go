package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/internal/segment"
	"github.com/newsletter/newsletter/store"
)

var segmentIDRe = regexp.MustCompile(`^/admin/segments/(\d+)\?done=segment-saved$`)

// segmentCount is the JSON of GET /admin/segments/count.
type segmentCount struct {
	Active   int64  `json:"active"`
	Matching int64  `json:"matching"`
	Text     string `json:"text"`
	Error    string `json:"error"`
	Position int    `json:"position"`
}

// liveCount asks the console's count as the editor's script does.
func (b *browser) liveCount(expr string) (int, segmentCount) {
	b.t.Helper()
	req, _ := http.NewRequest("GET", b.e.srv.URL+"/admin/segments/count?expr="+url.QueryEscape(expr), nil)
	req.Header.Set("Accept", "application/json")
	p := b.do(req)
	var c segmentCount
	if err := json.Unmarshal([]byte(p.body), &c); err != nil {
		b.t.Fatalf("count %q: %d %s", expr, p.code, p.body)
	}
	return p.code, c
}

// seedSegmentPeople subscribes people with every mix of the topics
// digest and updates and the tags beta and paid, some of them pending
// and some unsubscribed, and answers them as the store keeps them now.
func seedSegmentPeople(t *testing.T, e *env) []store.Subscriber {
	t.Helper()
	ctx := context.Background()
	var ids []int64
	n := 0
	for _, tps := range [][]string{{"digest"}, {"updates"}, {"digest", "updates"}} {
		for _, tags := range [][]string{nil, {"beta"}, {"paid"}, {"beta", "paid"}} {
			for k := range 3 {
				n++
				// The second of each mix is pending (not confirmed), the
				// third unsubscribed.
				sub, err := e.st.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("p%d@example.com", n), Activate: k != 1, Topics: tps, Tags: tags})
				if err != nil {
					t.Fatal(err)
				}
				if k == 2 {
					if _, err := e.st.Unsubscribe(ctx, sub.Email); err != nil {
						t.Fatal(err)
					}
				}
				ids = append(ids, sub.ID)
			}
		}
	}
	subs, err := e.st.SubscribersByID(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	return subs
}

// bruteCount evaluates "topic:updates AND tag:beta AND NOT tag:paid"
// person by person over their stored records, as the bitmaps must agree.
func bruteCount(subs []store.Subscriber) (active, matching int64) {
	for _, s := range subs {
		if slices.Contains(s.Topics, "updates") && slices.Contains(s.Tags, "beta") && !slices.Contains(s.Tags, "paid") {
			matching++
			if s.Status == store.Active {
				active++
			}
		}
	}
	return active, matching
}

const betaUnpaid = "topic:updates AND tag:beta AND NOT tag:paid"

// TestSegmentBadExpressionRefused: an expression that does not parse or
// check is refused with the parser's message (where it is wrong, and a
// caret under it), nothing is saved or audited; a name another segment
// has is a 409; a viewer may look but not save.
func TestSegmentBadExpressionRefused(t *testing.T) {
	e := newEnv(t)
	seedSegmentPeople(t, e)
	ed := e.signedIn(t, editorToken)
	for _, expr := range []string{
		"topic:updates AND (tag:beta",
		"topic:nope",
		"tag:never-given",
		"joined > yesterday",
		"topic:updates AND AND tag:beta",
	} {
		_, want := e.st.CheckSegment(context.Background(), expr)
		var bad *segment.Error
		if !errors.As(want, &bad) {
			t.Fatalf("the store takes %q (%v): not a bad expression", expr, want)
		}
		p := ed.post("/admin/segments", url.Values{"name": {"Broken"}, "expr": {expr}})
		if p.code != http.StatusBadRequest {
			t.Fatalf("%q: %d, want 400", expr, p.code)
		}
		mustContain(t, expr, p, html.EscapeString(bad.Error()), `aria-invalid="true"`, `value="Broken"`, html.EscapeString(expr)+"</textarea>")
		if bad.Pos > 0 {
			mustContain(t, expr+": the caret", p, "\n"+strings.Repeat(" ", bad.Pos-1)+"^</pre>")
		}
	}
	if list, err := e.st.ListSegments(context.Background()); err != nil || len(list) != 0 {
		t.Fatalf("refused segments were saved: %+v %v", list, err)
	}
	for _, a := range e.audit.actions() {
		if strings.Contains(a, "segment.") {
			t.Fatalf("a refused segment is in the audit log: %v", e.audit.actions())
		}
	}

	p := ed.post("/admin/segments", url.Values{"name": {"Beta, unpaid"}, "expr": {betaUnpaid}})
	if p.code != http.StatusSeeOther || !segmentIDRe.MatchString(p.location) {
		t.Fatalf("save: %d %q\n%s", p.code, p.location, p.body)
	}
	if p := ed.post("/admin/segments", url.Values{"name": {"Beta, unpaid"}, "expr": {"tag:beta"}}); p.code != http.StatusConflict || !strings.Contains(p.body, "another segment") {
		t.Fatalf("a name taken: %d\n%s", p.code, p.body)
	}
	seg, err := e.st.GetSegment(context.Background(), "Beta, unpaid")
	if err != nil || seg.Expr != betaUnpaid {
		t.Fatalf("saved: %+v %v", seg, err)
	}
	path := "/admin/segments/" + itoa(seg.ID)
	// An edit to a bad expression keeps the saved one.
	if p := ed.post(path, url.Values{"name": {"Beta, unpaid"}, "expr": {"tag:beta OR"}}); p.code != http.StatusBadRequest || !strings.Contains(p.body, "segment: at position") {
		t.Fatalf("a bad edit: %d\n%s", p.code, p.body)
	}
	if again, _ := e.st.GetSegment(context.Background(), itoa(seg.ID)); again.Expr != betaUnpaid {
		t.Fatalf("a refused edit changed the segment: %+v", again)
	}

	vic := e.signedIn(t, viewerToken)
	mustContain(t, "the viewer's list", vic.get("/admin/segments"), "Beta, unpaid", html.EscapeString(betaUnpaid))
	if p := vic.get(path); p.code != 200 || strings.Contains(p.body, `id="segment-form"`) || !strings.Contains(p.body, "active") {
		t.Fatalf("the viewer's segment page: %d\n%s", p.code, p.body)
	}
	for _, post := range []string{"/admin/segments", path, path + "/delete"} {
		if p := vic.post(post, url.Values{"name": {"Mine"}, "expr": {"tag:beta"}}); p.code != http.StatusForbidden {
			t.Fatalf("a viewer's POST %s: %d", post, p.code)
		}
	}
	if list, _ := e.st.ListSegments(context.Background()); len(list) != 1 || list[0].Expr != betaUnpaid {
		t.Fatalf("after the viewer: %+v", list)
	}
}

// TestSegmentLiveCount: the editor's count (the script's JSON and the
// Count button's page) is what a person-by-person evaluation of the
// stored records gives, active and of any status; a bad expression
// answers the parser's message and its position.
func TestSegmentLiveCount(t *testing.T) {
	e := newEnv(t)
	subs := seedSegmentPeople(t, e)
	active, matching := bruteCount(subs)
	if active == 0 || matching == active {
		t.Fatalf("the people seeded give %d active, %d in all: the test would prove little", active, matching)
	}
	vic := e.signedIn(t, viewerToken) // counting is a read
	code, c := vic.liveCount(betaUnpaid)
	if code != http.StatusOK || c.Active != active || c.Matching != matching || !strings.Contains(c.Text, strconv.FormatInt(active, 10)+" active") {
		t.Fatalf("live count: %d %+v, want %d active, %d in all", code, c, active, matching)
	}
	// A narrower expression counts fewer: the count follows the typing.
	code, narrower := vic.liveCount(betaUnpaid + " AND topic:digest")
	if code != http.StatusOK || narrower.Active >= c.Active {
		t.Fatalf("narrower: %d %+v", code, narrower)
	}
	code, c = vic.liveCount("topic:updates AND (tag:beta")
	if code != http.StatusBadRequest || !strings.Contains(c.Error, "segment: at position") || c.Position == 0 {
		t.Fatalf("a bad expression: %d %+v", code, c)
	}

	// No script: the Count button sends the form by GET and gets the page
	// with the count, nothing saved.
	ed := e.signedIn(t, editorToken)
	p := ed.get("/admin/segments/count?" + url.Values{"name": {"Draft"}, "expr": {betaUnpaid}}.Encode())
	mustContain(t, "the Count button", p, `value="Draft"`, strconv.FormatInt(active, 10)+" active people match now ("+strconv.FormatInt(matching, 10)+" of any status)")
	if list, _ := e.st.ListSegments(context.Background()); len(list) != 0 {
		t.Fatal("counting saved a segment")
	}
	// The list shows each saved segment's audience.
	if _, err := e.st.CreateSegment(context.Background(), "Beta, unpaid", betaUnpaid); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "the list", vic.get("/admin/segments"), `<td class="num" data-field="active">`+strconv.FormatInt(active, 10)+`</td>`)
}

// TestIssueSegmentInTheConsole: the issue editor sends to a segment (the
// send step counts its people), keeps the segment of an issue the API
// made when the console saves it, goes back to topics when asked, and
// refuses a segment audience without a segment; a segment an unsent
// issue goes to cannot be deleted.
func TestIssueSegmentInTheConsole(t *testing.T) {
	e := newEnv(t)
	subs := seedSegmentPeople(t, e)
	active, _ := bruteCount(subs)
	ctx := context.Background()
	seg, err := e.st.CreateSegment(ctx, "Beta, unpaid", betaUnpaid)
	if err != nil {
		t.Fatal(err)
	}
	ed := e.signedIn(t, editorToken)

	// Made through the API with a segment, saved in the console with a
	// new subject: the segment stays.
	apiSrv := api.New(api.Config{AdminToken: envToken}, api.Deps{Store: e.st, Issues: e.st, Log: quietLog()})
	req, _ := http.NewRequest("POST", "/api/issues", strings.NewReader(`{"subject":"For the beta","body":"Hello","segment":"Beta, unpaid"}`))
	req.Header.Set("Authorization", "Bearer "+envToken)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	apiSrv.ServeHTTP(rec, req)
	var made store.Issue
	if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &made) != nil {
		t.Fatalf("POST /api/issues: %d %s", rec.Code, rec.Body)
	}
	if made, err = e.st.Issue(ctx, made.ID); err != nil || made.Segment != seg.ID {
		t.Fatalf("the API's issue: %+v %v", made, err)
	}
	path := "/admin/issues/" + itoa(made.ID)
	page := ed.get(path)
	mustContain(t, "the editor of an API issue", page, `value="segment" checked`, `<option value="`+itoa(seg.ID)+`" selected>Beta, unpaid</option>`,
		"reaches <strong>"+strconv.FormatInt(active, 10)+"</strong> readers now: the active people of the segment",
		// A segment's issue without topics: the mail as a reader of the
		// first topic gets it (each reader gets it as one of theirs).
		`srcdoc="&lt;p&gt;digest: For the beta / Hello&lt;/p&gt;"`, "as a reader of digest gets it")
	form := editorForm(t, page.body)
	form.Set("subject", "For the beta, revised")
	if p := ed.post(path, form); p.code != http.StatusSeeOther {
		t.Fatalf("save: %d\n%s", p.code, p.body)
	}
	if is, err := e.st.Issue(ctx, made.ID); err != nil || is.Subject != "For the beta, revised" || is.Segment != seg.ID || len(is.Topics) != 0 {
		t.Fatalf("after the console's save: %+v %v", is, err)
	}
	if p := ed.post("/admin/segments/"+itoa(seg.ID)+"/delete", nil); p.code != http.StatusConflict || !strings.Contains(p.body, "Issue "+itoa(made.ID)) {
		t.Fatalf("deleting a segment in use: %d\n%s", p.code, p.body)
	}

	// Made in the console, to a segment: stored with it; then to topics.
	p := ed.post("/admin/issues", url.Values{"subject": {"Console's"}, "body": {"b"}, "audience": {"segment"}, "segment": {itoa(seg.ID)}})
	m := issueIDRe.FindStringSubmatch(p.location)
	if p.code != http.StatusSeeOther || m == nil {
		t.Fatalf("create: %d %q\n%s", p.code, p.location, p.body)
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	if is, err := e.st.Issue(ctx, id); err != nil || is.Segment != seg.ID {
		t.Fatalf("the console's issue: %+v %v", is, err)
	}
	form = editorForm(t, ed.get("/admin/issues/"+m[1]).body)
	form.Set("audience", "topics")
	form["topics"] = []string{"digest"}
	if p := ed.post("/admin/issues/"+m[1], form); p.code != http.StatusSeeOther {
		t.Fatalf("to topics: %d\n%s", p.code, p.body)
	}
	if is, _ := e.st.Issue(ctx, id); is.Segment != 0 || !slices.Equal(is.Topics, []string{"digest"}) {
		t.Fatalf("back to topics: %+v", is)
	}

	// A segment audience needs a segment that exists.
	before, _ := e.st.Issue(ctx, id)
	for _, pick := range []string{"", "999"} {
		form.Set("audience", "segment")
		form.Set("segment", pick)
		form.Set("version", strconv.Itoa(before.Version))
		if p := ed.post("/admin/issues/"+m[1], form); p.code != http.StatusBadRequest || !strings.Contains(p.body, "segment: ") {
			t.Fatalf("segment %q: %d\n%s", pick, p.code, p.body)
		}
	}
	if is, _ := e.st.Issue(ctx, id); is.Version != before.Version || is.Segment != 0 {
		t.Fatalf("a refused audience was saved: %+v", is)
	}
}

// editorForm reads the issue editor's fields back as a browser would
// post them (the ticked topics, the chosen audience and segment).
func editorForm(t *testing.T, body string) url.Values {
	t.Helper()
	f := url.Values{}
	attr := func(tag, name string) string {
		m := regexp.MustCompile(name + `="([^"]*)"`).FindStringSubmatch(tag)
		if m == nil {
			return ""
		}
		return html.UnescapeString(m[1])
	}
	start := strings.Index(body, `id="editor"`)
	end := strings.Index(body[max(start, 0):], "</form>")
	if start < 0 || end < 0 {
		t.Fatalf("no editor on the page:\n%s", body)
	}
	form := body[start : start+end]
	for _, tag := range regexp.MustCompile(`<input [^>]*>`).FindAllString(form, -1) {
		name, typ := attr(tag, "name"), attr(tag, "type")
		if name == "" || ((typ == "checkbox" || typ == "radio") && !strings.Contains(tag, " checked")) {
			continue
		}
		f.Add(name, attr(tag, "value"))
	}
	if m := regexp.MustCompile(`<option value="([^"]*)" selected>`).FindStringSubmatch(form); m != nil {
		f.Set("segment", m[1])
	}
	if m := regexp.MustCompile(`(?s)<textarea id="body" name="body"[^>]*>(.*?)</textarea>`).FindStringSubmatch(form); m != nil {
		f.Set("body", html.UnescapeString(m[1]))
	}
	return f
}

// TestSegmentLiveCountBounded: the live count refuses an expression of
// more than segment.MaxTerms terms as a parse error (400, the position
// of the term past the bound), and a count that does not finish within
// the store's bound answers a clear 503 (JSON) or says so on the page,
// the segments' list too.
func TestSegmentLiveCountBounded(t *testing.T) {
	e := newEnv(t)
	vic := e.signedIn(t, viewerToken)
	long := strings.Repeat("topic:digest OR ", segment.MaxTerms) + "topic:updates"
	code, c := vic.liveCount(long)
	if code != http.StatusBadRequest || !strings.Contains(c.Error, "more than 50 terms") || c.Position != len("topic:digest OR ")*segment.MaxTerms+1 {
		t.Fatalf("%d terms: %d %+v", segment.MaxTerms+1, code, c)
	}

	slow := newEnvOf(t, func(st *store.Redis) *store.Redis { return st.WithSegmentCountTimeout(time.Nanosecond) })
	if _, err := slow.st.CreateSegment(context.Background(), "Digest", "topic:digest"); err != nil {
		t.Fatal(err)
	}
	vic = slow.signedIn(t, viewerToken)
	code, c = vic.liveCount("topic:digest")
	if code != http.StatusServiceUnavailable || !strings.Contains(c.Error, "the count did not finish in time") {
		t.Fatalf("a count past its bound: %d %+v", code, c)
	}
	mustContain(t, "the Count button past the bound", vic.get("/admin/segments/count?"+url.Values{"expr": {"topic:digest"}}.Encode()), "the count did not finish in time")
	mustContain(t, "the list past the bound", vic.get("/admin/segments"), "the count did not finish in time")
}
