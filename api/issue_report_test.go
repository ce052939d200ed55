package api

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// fakeEngagement is the counted redirect's side of a report: what the
// test says the readers did.
type fakeEngagement map[int64]store.Engagement

func (f fakeEngagement) IssueEngagement(_ context.Context, id int64) (store.Engagement, error) {
	return f[id], nil
}

var _ store.EngagementReader = fakeEngagement{}

// TestIssueReport: GET /api/issues/{id}/report counts the people who
// left through the issue's own links (one-click, the page's button, the
// preference centre), once each, and nobody who left by another mail's
// link; it lists each link's counts from the engagement source, as JSON
// and as CSV.
func TestIssueReport(t *testing.T) {
	var e *issueEnv
	eng := fakeEngagement{}
	e = &issueEnv{mail: &fakeIssueMail{}}
	e.env = newEnvWith(t, Config{AdminToken: "s3cret"}, func(d *Deps) {
		e.st = d.Store.(*store.Redis)
		*d = d.WithIssues(e.st, e.mail)
		d.Engagement = eng
	})
	ctx := context.Background()
	e.readers(t, 5)
	id := e.create(t, goodIssue)
	if code, out := e.do(t, "POST", fmt.Sprintf("/api/issues/%d/send", id), `{}`); code != http.StatusAccepted {
		t.Fatalf("send: %d %s", code, out)
	}
	at := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	eng[id] = store.Engagement{
		Links: []store.LinkStat{
			{Index: 0, URL: "https://example.com/a", Clicks: 7, UniqueClickers: 4, MachineClicks: 2},
			{Index: 1, URL: "=HYPERLINK(\"x\")", Clicks: 1, UniqueClickers: 1},
		},
		Clicks: 8, UniqueClickers: 4, MachineClicks: 2,
		Hours: []store.HourCount{{Hour: at, Clicks: 5, MachineClicks: 2}, {Hour: at.Add(3 * time.Hour), Clicks: 3}},
	}
	idOf := func(email string) int64 {
		sub, err := e.st.Get(ctx, email)
		if err != nil {
			t.Fatal(err)
		}
		return sub.ID
	}
	oneClick := func(tok string) {
		t.Helper()
		resp, body := e.post(t, "/unsubscribe?token="+url.QueryEscape(tok), "application/x-www-form-urlencoded", "List-Unsubscribe=One-Click")
		if resp.StatusCode != 200 {
			t.Fatalf("one-click: %d %s", resp.StatusCode, body)
		}
	}
	// r0: the issue's List-Unsubscribe, twice (a mail client may post it
	// again): once.
	issueTok := e.signer.SignIssue(token.Unsubscribe, idOf("r0@example.com"), "digest", id)
	oneClick(issueTok)
	oneClick(issueTok)
	// r1: the page's button, the token in the body.
	if resp, body := e.post(t, "/unsubscribe", "application/x-www-form-urlencoded",
		"token="+url.QueryEscape(e.signer.SignIssue(token.Unsubscribe, idOf("r1@example.com"), "digest", id))); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the page's button: %d %s", resp.StatusCode, body)
	}
	// r2: the issue's preference centre, leaving everything.
	req, _ := http.NewRequest("POST", e.srv.URL+"/preferences", strings.NewReader("leave=all&token="+
		url.QueryEscape(e.signer.SignIssue(token.Preferences, idOf("r2@example.com"), "", id))))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the preference centre's leave: %d", resp.StatusCode)
	}
	// r3: another mail's link (the welcome's): not this issue's.
	oneClick(e.signer.SignTopic(token.Unsubscribe, idOf("r3@example.com"), "digest"))
	for _, email := range []string{"r0@example.com", "r1@example.com", "r2@example.com", "r3@example.com"} {
		if st := e.status(t, email); st != store.Unsubscribed {
			t.Fatalf("%s is %s after leaving", email, st)
		}
	}

	code, out := e.do(t, "GET", fmt.Sprintf("/api/issues/%d/report", id), "")
	if code != 200 {
		t.Fatalf("report: %d %s", code, out)
	}
	var rep issues.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Issue != id || rep.Status != store.IssueSending || rep.Unsubscribed != 3 || rep.Clicks != 8 || rep.UniqueClickers != 4 || rep.MachineClicks != 2 {
		t.Fatalf("report: %+v", rep)
	}
	for _, field := range []string{`"url":"https://example.com/a"`, `"clicks":7`, `"unique_clickers":4`, `"machine_clicks":2`, `"delivered":0`, `"bounced":0`, `"complained":0`} {
		if !strings.Contains(out, field) {
			t.Errorf("the JSON lacks %s: %s", field, out)
		}
	}
	if len(rep.Hours) != 4 || rep.Hours[0].Clicks != 5 || rep.Hours[1].Clicks != 0 || rep.Hours[3].Since != 3 || rep.Hours[3].Clicks != 3 {
		t.Errorf("hours: %+v", rep.Hours)
	}

	req, _ = http.NewRequest("GET", e.srv.URL+fmt.Sprintf("/api/issues/%d/report?format=csv", id), nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/csv") {
		t.Fatalf("csv: %d %s", resp.StatusCode, ct)
	}
	rows, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"row", "index", "url", "clicks", "unique_clickers", "machine_clicks"},
		{"link", "0", "https://example.com/a", "7", "4", "2"},
		{"link", "1", "'=HYPERLINK(\"x\")", "1", "1", "0"},
		{"total", "", "", "8", "4", "2"},
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("csv:\n%q\nwant\n%q", rows, want)
	}

	// Bad input: 400 or 404, and a report with nothing counted is zeros.
	if code, out := e.do(t, "GET", fmt.Sprintf("/api/issues/%d/report?format=xml", id), ""); code != 400 {
		t.Errorf("format=xml: %d %s", code, out)
	}
	if code, _ := e.do(t, "GET", "/api/issues/999/report", ""); code != 404 {
		t.Errorf("an unknown issue: %d", code)
	}
	other := e.create(t, goodIssue)
	if code, out := e.do(t, "GET", fmt.Sprintf("/api/issues/%d/report", other), ""); code != 200 ||
		!strings.Contains(out, `"links":[]`) || !strings.Contains(out, `"unsubscribed":0`) || !strings.Contains(out, `"hours":[]`) {
		t.Errorf("a draft's report: %d %s", code, out)
	}
}

// TestTopicGrowthRoute: GET /api/topics/{id}/growth gives the topic's
// days by source; an unknown topic is 404, bad days 400.
func TestTopicGrowthRoute(t *testing.T) {
	e := newIssueEnv(t)
	ctx := context.Background()
	for i, src := range []store.ConsentSource{store.SourceImport, store.SourceImport, store.SourceAPI} {
		if _, err := e.st.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("g%d@example.com", i), Activate: true,
			Topics: []string{"digest"}, Source: src}); err != nil {
			t.Fatal(err)
		}
	}
	code, out := e.do(t, "GET", "/api/topics/digest/growth?days=3", "")
	var g store.TopicGrowth
	if err := json.Unmarshal([]byte(out), &g); code != 200 || err != nil {
		t.Fatalf("growth: %d %s %v", code, out, err)
	}
	if g.Topic != "digest" || len(g.Days) != 3 || g.Days[2].Import != 2 || g.Days[2].API != 1 || g.Total.Import != 2 || g.Total.Form != 0 {
		t.Fatalf("growth: %s", out)
	}
	if code, _ := e.do(t, "GET", "/api/topics/nope/growth", ""); code != 404 {
		t.Errorf("an unknown topic: %d", code)
	}
	if code, _ := e.do(t, "GET", "/api/topics/digest/growth?days=91", ""); code != 400 {
		t.Errorf("days=91: %d", code)
	}
}
