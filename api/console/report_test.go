package console_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/store"
)

// TestIssuePageShowsTheReport: a sending issue's page shows its report:
// delivered, bounced, unsubscribed through its links, each link's
// readers, clicks and machine clicks, the hour-by-hour chart and the CSV
// download, which gives the same numbers; a draft's page shows none.
func TestIssuePageShowsTheReport(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var subs []store.Subscriber
	for i := range 3 {
		subs = append(subs, e.subscribe(t, fmt.Sprintf("r%d@example.com", i), "digest"))
	}
	is, err := e.st.CreateIssue(ctx, store.IssueContent{Subject: "December", Body: "[a](https://example.com/a)", Topics: []string{"digest"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	draft := e.signedIn(t, viewerToken).get(fmt.Sprintf("/admin/issues/%d", is.ID))
	if strings.Contains(draft.body, "data-report") {
		t.Fatal("a draft shows a report")
	}
	if is, err = e.st.TransitionIssue(ctx, is.ID, []string{store.IssueDraft}, store.IssueSending, store.IssueChange{}); err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprint(is.ID)
	for _, s := range subs {
		if err := e.st.MarkSent(ctx, store.Mark{Kind: store.IssueMarkKind, Key: key, SubscriberID: s.ID, Shared: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.st.UnsubscribeFrom(ctx, "r1@example.com", is.ID); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	e.eng[is.ID] = store.Engagement{
		Links:  []store.LinkStat{{Index: 0, URL: "https://example.com/a?<b>", Clicks: 1234, UniqueClickers: 2, MachineClicks: 5}},
		Clicks: 1234, UniqueClickers: 2, MachineClicks: 5,
		Hours: []store.HourCount{{Hour: at, Clicks: 1000, MachineClicks: 5}, {Hour: at.Add(2 * time.Hour), Clicks: 234}},
		Tens:  []store.HourCount{{Hour: at, Clicks: 1000, MachineClicks: 5}, {Hour: at.Add(2 * time.Hour), Clicks: 234}},
	}
	b := e.signedIn(t, viewerToken)
	p := b.get(fmt.Sprintf("/admin/issues/%d", is.ID))
	mustContain(t, "the report", p, `data-report`,
		`data-field="delivered">3<`, `data-field="bounced">0<`, `data-field="unsubscribed">1<`,
		`data-field="unique_clickers">2<`, "data-field=\"clicks\">1\u202f234<", `5 by machines, apart`,
		"<tr data-link=\"0\"><td style=\"word-break:break-all\">https://example.com/a?&lt;b&gt;</td><td class=\"num\">2</td><td class=\"num\">1\u202f234</td><td class=\"num\">5</td></tr>",
		// Three hours fit the first six: the chart is by ten minutes.
		`<title id="report-chart-title">Clicks per 10 minutes over the first 130 minutes</title>`,
		`data-report="live"`, `data-report-asof`, `refreshes itself every 10 seconds`,
		fmt.Sprintf(`href="/admin/issues/%d/report.csv" download`, is.ID))
	if strings.Contains(p.body, "<b>") {
		t.Fatal("a link's URL reached the page unescaped")
	}
	csvPage := b.get(fmt.Sprintf("/admin/issues/%d/report.csv", is.ID))
	if csvPage.code != 200 || !strings.HasPrefix(csvPage.header.Get("Content-Type"), "text/csv") {
		t.Fatalf("the CSV: %d %s", csvPage.code, csvPage.header.Get("Content-Type"))
	}
	rows, err := csv.NewReader(strings.NewReader(csvPage.body)).ReadAll()
	if err != nil || fmt.Sprint(rows) != fmt.Sprint([][]string{{"row", "index", "url", "clicks", "unique_clickers", "machine_clicks"},
		{"link", "0", "https://example.com/a?<b>", "1234", "2", "5"}, {"total", "", "", "1234", "2", "5"}}) {
		t.Fatalf("the CSV: %q %v", rows, err)
	}
	if p := e.signedIn(t, viewerToken).get("/admin/issues/999/report.csv"); p.code != 404 {
		t.Fatalf("an unknown issue's CSV: %d", p.code)
	}
}

// TestOverviewShowsEachTopicsGrowth: the overview draws each topic's new
// subscriptions by source, those added by hand too (the overview once
// left the admin source out: a list built in the console grew by 0).
func TestOverviewShowsEachTopicsGrowth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i, src := range []store.ConsentSource{store.SourceImport, store.SourceImport, store.SourceAPI, store.SourceForm, store.SourceAdmin, store.SourceAdmin, store.SourceAdmin} {
		if _, err := e.st.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("g%d@example.com", i), Activate: true,
			Topics: []string{"updates"}, Source: src}); err != nil {
			t.Fatal(err)
		}
	}
	p := e.signedIn(t, viewerToken).get("/admin/")
	mustContain(t, "the growth", p, `data-growth="updates">1 form, 2 import, 1 API, 3 added by hand<`,
		`<title id="growth-updates-title">New subscriptions to`, `<title id="growth-digest-title">`)
}
