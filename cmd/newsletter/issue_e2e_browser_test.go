package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/store"
)

// archiveLetter is a letter with what Markdown gives a writer: headings,
// a list, links, emphasis, a quote. (That raw HTML stays text on the page
// api's TestArchivePagesLoadInChromiumWithoutErrors checks.)
const archiveLetter = `Hello readers, spring is here, and the bakery has three changes for you.

## What changed

- **Sourdough** comes out of the oven twice a day now.
- Every letter has a [web version](https://example.com/archive) you can share.
- From April we open at *08:00*, an hour earlier.

## What is next

> Bake less, bake better.

Tell us what you would like to read about: reply to this mail, or see the
[spring menu](https://example.com/menu).
`

// TestE2EArchivePageInBrowser sends an issue and opens its archive page
// in headless Chromium, as a reader who follows "view in the browser":
// the subject, the Markdown's headings, list and links, and nothing
// personal. With NEWSLETTER_E2E_SCREENSHOTS it is the guide's picture
// (7-archive.png).
func TestE2EArchivePageInBrowser(t *testing.T) {
	parallel(t) // an embedded Redis of its own, first: the browser's deadline runs from its making
	b := browser{t: t, ctx: newBrowser(t)}
	svc := startService(t, map[string]string{"NEWSLETTER_ADMIN_TOKEN": issueAdmin, "NEWSLETTER_POLL_INTERVAL": "50ms"}, "serve")
	id := svc.createIssue(t, "Spring notes: three changes", "What changed this spring", archiveLetter, "updates")
	// Nobody reads "updates" yet: the archive page is what this test is about.
	svc.callJSON(t, "POST", fmt.Sprintf("/api/issues/%d/send", id), `{"force":true}`, http.StatusAccepted, nil)
	var is struct{ Slug, Status string }
	poll.True(t, poll.BusyMachine, "the issue to be sent", func() bool {
		svc.callJSON(t, "GET", fmt.Sprintf("/api/issues/%d", id), "", http.StatusOK, &is)
		return is.Status == store.IssueSent
	})

	b.do(chromedp.EmulateViewport(1000, 760), chromedp.Navigate(svc.base+"/archive/"+is.Slug), chromedp.WaitVisible(chromedp.CSS("article h1")))
	b.heading("Spring notes: three changes")
	if got := b.text("article .issue h2"); got != "What changed" {
		t.Fatalf("first heading of the letter %q", got)
	}
	items, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll("article .issue ul li").length`))
	if err != nil || items != 3 {
		t.Fatalf("%d list items (%v), want 3", items, err)
	}
	href, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("article .issue a").href`))
	if err != nil || href != "https://example.com/archive" {
		t.Fatalf("first link %q (%v)", href, err)
	}
	// Nothing personal on the page: no token, no unsubscribe link.
	if html, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`)); err != nil || strings.Contains(html, "token=") {
		t.Fatalf("the archive page has a personal link (%v)", err)
	}
	b.shot("7-archive")
}
