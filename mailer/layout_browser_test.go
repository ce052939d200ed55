package mailer

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/newsletter/newsletter/internal/testkit/browser"
)

// TestLayoutReadsOnAPhone opens an issue's mail in Chromium at a phone's
// width and at 600 px and at a desktop's. The issue holds what widens a
// careless layout: an image four times a phone's width, an address and a
// line of code with no place to break, a table. At 375 px nothing scrolls
// sideways and the card is the screen's width; at 600 px it is 600 px;
// wider, it stays 600 px, centred. (NEWSLETTER_E2E_SCREENSHOTS keeps the
// pictures for docs/.)
func TestLayoutReadsOnAPhone(t *testing.T) {
	ctx := browser.New(t, 375, 800)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /wide.svg", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		fmt.Fprint(w, `<svg xmlns="http://www.w3.org/2000/svg" width="1600" height="400"><rect width="1600" height="400" fill="#3a6ea5"/></svg>`)
	})
	var page string
	mux.HandleFunc("GET /mail", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	body, err := RenderMarkdown("# A letter that is wide\n\n![A chart](" + srv.URL + "/wide.svg)\n\n" +
		"Read https://example.com/" + strings.Repeat("averyveryverylongpathsegment", 8) + " today.\n\n" +
		"```\n" + strings.Repeat("unbreakable_code_", 20) + "\n```\n\n" +
		"| Plan | Price | Seats |\n| --- | --- | --- |\n| Team | 10 | 5 |\n")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Render(KindIssue, Data{Email: "ann@example.com", Subject: "A letter that is wide",
		IssueHTML: body.HTML, IssueText: body.Text, PreferencesURL: "https://news.example.com/p", Topic: "Updates"})
	if err != nil {
		t.Fatal(err)
	}
	page = m.HTML

	type layout struct {
		Viewport, Scroll, Card, Image float64
	}
	const measure = `(() => {
		const card = document.querySelector(".nl-card").getBoundingClientRect();
		const img = document.querySelector(".nl-body img");
		return {Viewport: document.documentElement.clientWidth, Scroll: document.documentElement.scrollWidth,
			Card: card.width, Image: img && img.complete ? img.getBoundingClientRect().width : -1};
	})()`
	for _, c := range []struct {
		width    int64
		wantCard func(viewport float64) float64
	}{
		{375, func(v float64) float64 { return v }},
		{600, func(v float64) float64 { return v }},
		{1000, func(float64) float64 { return 600 }},
	} {
		if err := chromedp.Do(ctx,
			chromedp.EmulateViewport(c.width, 800),
			chromedp.Navigate(srv.URL+"/mail"),
			chromedp.WaitVisible(chromedp.CSS(".nl-body img")),
		); err != nil {
			t.Fatalf("at %d px: %v", c.width, err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector(".nl-body img").complete && document.querySelector(".nl-body img").naturalWidth > 0`)); err != nil {
			t.Fatalf("at %d px, the image: %v", c.width, err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[layout](measure))
		if err != nil {
			t.Fatalf("at %d px: %v", c.width, err)
		}
		if got.Scroll > got.Viewport {
			t.Errorf("at %d px the mail scrolls sideways: %v px wide in a %v px viewport", c.width, got.Scroll, got.Viewport)
		}
		if want := c.wantCard(got.Viewport); got.Card != want {
			t.Errorf("at %d px the card is %v px wide, want %v", c.width, got.Card, want)
		}
		if got.Image <= 0 || got.Image > got.Card {
			t.Errorf("at %d px the image is %v px wide in a %v px card", c.width, got.Image, got.Card)
		}
		browser.Shot(t, ctx, fmt.Sprintf("mail-%d", c.width))
	}
}

// TestTableFitsAt320 opens an issue with a table of four columns, words
// too long for a phone's cell among them, in Chromium at 320 px: as sent
// and with every <style> removed (Gmail keeps only the inline styles, and
// Outlook.com some), nothing scrolls sideways and the table is no wider
// than the card.
func TestTableFitsAt320(t *testing.T) {
	ctx := browser.New(t, 320, 800)
	body, err := RenderMarkdown("| Plan | Monthly price in euros | Seats included | Notes |\n| --- | --- | --- | --- |\n" +
		"| Team | 10 | 5 | Includes https://example.com/" + strings.Repeat("averylongpath", 6) + " |\n" +
		"| Enterprise-with-a-very-long-name | 1000 | unlimited | " + strings.Repeat("supercalifragilistic", 3) + " |\n")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Render(KindIssue, Data{Email: "ann@example.com", Subject: "A table", IssueHTML: body.HTML, IssueText: body.Text,
		PreferencesURL: "https://news.example.com/p", Topic: "Updates"})
	if err != nil {
		t.Fatal(err)
	}
	var page string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mail", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	styles := regexp.MustCompile(`(?s)<style>.*?</style>`)
	for name, html := range map[string]string{"as sent": m.HTML, "without <style>": styles.ReplaceAllString(m.HTML, "")} {
		page = html
		type sizes struct{ Viewport, Scroll, Card, Table float64 }
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(320, 800), chromedp.Navigate(srv.URL+"/mail"), chromedp.WaitVisible(chromedp.CSS(".nl-body table"))); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[sizes](`(() => ({Viewport: document.documentElement.clientWidth,
			Scroll: document.documentElement.scrollWidth, Card: document.querySelector(".nl-card").getBoundingClientRect().width,
			Table: document.querySelector(".nl-body table").getBoundingClientRect().width}))()`))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Scroll > got.Viewport || got.Table > got.Card {
			t.Errorf("%s at 320 px: the page is %v px wide in a %v px viewport, the table %v px in a %v px card", name, got.Scroll, got.Viewport, got.Table, got.Card)
		}
		browser.Shot(t, ctx, "table-320-"+strings.ReplaceAll(strings.Trim(name, "<>"), " ", "-"))
	}
}
