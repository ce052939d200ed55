package inbox

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/internal/testkit/browser"
	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// browserWait bounds each wait for the browser to show something: long
// enough for a busy 2-core machine; a passing test never waits it out.
const browserWait = 30 * time.Second

// serverCount is p's unread count as the reader API answers it.
func serverCount(t *testing.T, c *Channel, p channels.Person) string {
	t.Helper()
	w := call(t, c.Handler(), "GET", "/count", p, "")
	if w.Code != http.StatusOK {
		t.Fatalf("count: %d %s", w.Code, w.Body)
	}
	return strings.TrimSpace(w.Body.String())
}

// shadow is the component's shadow root, as a script sees it.
const shadow = `document.querySelector("newsletter-inbox").shadowRoot`

// TestInboxComponentInChromium: a product's page on an origin of its own
// (listed in Origins, so the calls cross origins and CORS applies for
// real) and a strict CSP loads the component from the inbox's server, mounted under
// /inbox as the service mounts it, with no base: the component finds
// the routes where its script came from. The bell shows the unread
// count; opening the panel lists the messages with their rendered
// bodies; "Mark read" lowers the count, on the page and on the server;
// a message delivered while the page is open appears at the top and
// raises the count (the event stream); "Mark all read" leaves none.
func TestInboxComponentInChromium(t *testing.T) {
	var inboxURL string // set before the browser asks for the page
	hash, err := Hash([]byte(testSecret), ana.Email)
	if err != nil {
		t.Fatal(err)
	}
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		// A strict policy: the component needs the inbox's origin for its
		// script and calls, and no inline style.
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src "+inboxURL+"; connect-src "+inboxURL)
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>The product</title></head>
<body><header><newsletter-inbox subscriber="%s" hash="%s"></newsletter-inbox></header>
<main><p>The product's page.</p></main>
<script src="%s/inbox/inbox.js"></script></body></html>`, html.EscapeString(ana.Email), hash, html.EscapeString(inboxURL))
	}))
	t.Cleanup(host.Close)

	c, _ := newTestInbox(t, Config{Origins: []string{host.URL}})
	mux := http.NewServeMux()
	h := http.StripPrefix("/inbox", c.Handler())
	mux.Handle("/inbox/", h)
	mux.Handle("/inbox", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		c.CloseStreams()
		srv.Close()
	})
	inboxURL = srv.URL
	if u1, u2 := mustParse(t, host.URL), mustParse(t, srv.URL); u1.Host == u2.Host {
		t.Fatalf("the product and the inbox share an origin (%s): CORS would not apply", u1.Host)
	}
	for i, title := range []string{"One", "Two", "Three"} {
		if o := deliver(t, c, ana, fmt.Sprintf("ev:ev_%d", i+1), title, fmt.Sprintf("Body of **%s**", strings.ToLower(title))); o.Verdict != channels.Sent {
			t.Fatalf("deliver %s: %v %v", title, o.Verdict, o.Err)
		}
	}

	ctx := browser.New(t, 1024, 900)
	if err := chromedp.Do(ctx, chromedp.Navigate(host.URL+"/")); err != nil {
		t.Fatal(err)
	}
	// eventually polls a script's answer until it is want.
	eventually := func(what, js, want string) {
		t.Helper()
		poll.Until(t, browserWait, func() error {
			got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
			if err != nil || got != want {
				return fmt.Errorf("%s: %q (%v), want %q", what, got, err, want)
			}
			return nil
		})
	}
	badge := `(() => { const b = ` + shadow + `.querySelector("[part=badge]"); return b.hidden ? "hidden" : b.textContent })()`
	bellLabel := shadow + `.querySelector("[part=bell]").getAttribute("aria-label") + " expanded=" + ` + shadow + `.querySelector("[part=bell]").getAttribute("aria-expanded")`
	// The list as "title*" for an unread message, "title" for a read one.
	titles := `[...` + shadow + `.querySelectorAll("li[data-id]")].map((li) => li.querySelector("[part=title]").textContent + (li.getAttribute("part").split(" ").includes("unread") ? "*" : "")).join("|")`
	panelShown := `(() => { const p = ` + shadow + `.querySelector("[part=panel]"); return String(!p.hidden && p.getBoundingClientRect().height > 0) })()`
	click := func(what, js string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.JSPath(js))); err != nil {
			t.Fatalf("click %s: %v", what, err)
		}
	}

	eventually("the badge", badge, "3")
	// Its style applies under the page's CSP, and the CSS variables theme it.
	badgeColor := `getComputedStyle(` + shadow + `.querySelector("[part=badge]")).backgroundColor`
	eventually("the badge's default colour", badgeColor, "rgb(37, 99, 235)")
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector("newsletter-inbox").style.setProperty("--inbox-accent", "rgb(11, 87, 208)")`)); err != nil {
		t.Fatal(err)
	}
	eventually("the badge's themed colour", badgeColor, "rgb(11, 87, 208)")
	eventually("the bell's label", bellLabel, "Inbox, 3 unread expanded=false")
	eventually("the panel before a click", panelShown, "false")

	click("the bell", shadow+`.querySelector("[part=bell]")`)
	eventually("the panel after a click", panelShown, "true")
	eventually("the bell's label, open", bellLabel, "Inbox, 3 unread expanded=true")
	eventually("the list", titles, "Three*|Two*|One*")
	// The body as the server rendered it, inside the shadow root; the
	// title links to the message's URL.
	eventually("a body", shadow+`.querySelector('li[data-id="ev_2"] [part=body]').innerHTML.trim()`, "<p>Body of <strong>two</strong></p>")
	eventually("a link", shadow+`.querySelector('li[data-id="ev_2"] [part=title] a').href`, "https://app.example/ev:ev_2")
	browser.Shot(t, ctx, "inbox-component")

	click("Mark read on Two", shadow+`.querySelector('li[data-id="ev_2"] button[data-do=read]')`)
	eventually("the badge after a read", badge, "2")
	eventually("the list after a read", titles, "Three*|Two|One*")
	eventually("Two's first button", shadow+`.querySelector('li[data-id="ev_2"] button').textContent`, "Mark unread")
	if got := serverCount(t, c, ana); got != `{"unread":2}` {
		t.Errorf("the server's count after the read: %s", got)
	}

	// Live: a message delivered while the page is open.
	if o := deliver(t, c, ana, "ev:ev_4", "Four", "Just now"); o.Verdict != channels.Sent {
		t.Fatalf("deliver Four: %v %v", o.Verdict, o.Err)
	}
	eventually("the list after a live delivery", titles, "Four*|Three*|Two|One*")
	eventually("the badge after a live delivery", badge, "3")
	eventually("the bell's label after a live delivery", bellLabel, "Inbox, 3 unread expanded=true")

	click("Archive on One", shadow+`.querySelector('li[data-id="ev_1"] button[data-do=archive]')`)
	eventually("the list after an archive", titles, "Four*|Three*|Two")
	eventually("the badge after an archive", badge, "2")

	click("Mark all read", shadow+`.querySelector("[part~=read-all]")`)
	eventually("the badge after mark all read", badge, "hidden")
	eventually("the list after mark all read", titles, "Four|Three|Two")
	eventually("the bell's label after mark all read", bellLabel, "Inbox, 0 unread expanded=true")
	if got := serverCount(t, c, ana); got != `{"unread":0}` {
		t.Errorf("the server's count after mark all read: %s", got)
	}

	// More than a page (20): the page loaded again lists the newest 20,
	// and "Load more" the rest.
	batch := make([]channels.Message, 20)
	for i := range batch {
		raw, err := json.Marshal(channels.EventMessage{Key: fmt.Sprintf("ev:ev_more%02d", i), Person: ana.ID, Title: fmt.Sprintf("More %02d", i), At: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		batch[i] = channels.Message{To: fmt.Sprint(ana.ID), Body: raw}
	}
	for i, o := range c.Send(context.Background(), batch) {
		if o.Verdict != channels.Sent {
			t.Fatalf("deliver More %02d: %v %v", i, o.Verdict, o.Err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(host.URL+"/")); err != nil {
		t.Fatal(err)
	}
	eventually("the badge with more than a page", badge, "20")
	click("the bell, again", shadow+`.querySelector("[part=bell]")`)
	items := `(() => { const r = ` + shadow + `; const li = r.querySelectorAll("li[data-id]"); return li.length + " " + li[0].dataset.id + ".." + li[li.length - 1].dataset.id + " more " + (r.querySelector("[part~=more]").hidden ? "hidden" : "shown") })()`
	eventually("the first page", items, "20 ev_more19..ev_more00 more shown")
	click("Load more", shadow+`.querySelector("[part~=more]")`)
	eventually("after Load more", items, "23 ev_more19..ev_2 more hidden")
}

// TestInboxPageWithoutJavaScript: the no-JS page, in Chromium with
// scripts off, shows the messages and the unread count; a message's
// "Mark read" form posts and lands back on the page, one lower; "Mark
// all read" leaves no count. The routes are served at the server's root.
func TestInboxPageWithoutJavaScript(t *testing.T) {
	c, _ := newTestInbox(t, Config{})
	srv := newTestServer(t, c)
	for i, title := range []string{"One", "Two", "Three"} {
		if o := deliver(t, c, ana, fmt.Sprintf("ev:ev_%d", i+1), title, "Body of **"+title+"**"); o.Verdict != channels.Sent {
			t.Fatalf("deliver %s: %v %v", title, o.Verdict, o.Err)
		}
	}
	hash, err := Hash([]byte(testSecret), ana.Email)
	if err != nil {
		t.Fatal(err)
	}
	creds := url.Values{"subscriber": {ana.Email}, "hash": {hash}}.Encode()

	ctx := browser.New(t, 800, 1000)
	noScript := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	})
	if err := chromedp.Do(ctx, noScript, chromedp.Navigate(srv.URL+"/?"+creds)); err != nil {
		t.Fatal(err)
	}
	// The page as the browser has it: the count in its heading, and
	// each message with the label of its first form's button.
	type shown struct {
		url, count, items string
	}
	li := regexp.MustCompile(`(?s)<li class="(unread)?" id="m-([^"]+)">.*?<button[^>]*>([^<]+)</button>`)
	read := func() (shown, error) {
		doc, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			return shown{}, err
		}
		nav, err := chromedp.Run(ctx, chromedp.NavigationEntries())
		if err != nil {
			return shown{}, err
		}
		s := shown{url: nav.Entries[nav.CurrentIndex].URL, count: "none"}
		if m := regexp.MustCompile(`<span class="count" id="unread">([^<]*)</span>`).FindStringSubmatch(doc); m != nil {
			s.count = m[1]
		}
		var items []string
		for _, m := range li.FindAllStringSubmatch(doc, -1) {
			items = append(items, m[2]+"="+m[3]+map[bool]string{true: "*"}[m[1] != ""])
		}
		s.items = strings.Join(items, "|")
		return s, nil
	}
	pageIs := func(what string, want shown) {
		t.Helper()
		poll.Until(t, browserWait, func() error {
			got, err := read()
			if err != nil || got != want {
				return fmt.Errorf("%s: %+v (%v), want %+v", what, got, err, want)
			}
			return nil
		})
	}
	page := srv.URL + "/?" + creds
	pageIs("the page", shown{url: page, count: "3 unread", items: "ev_3=Mark read*|ev_2=Mark read*|ev_1=Mark read*"})
	if doc, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("#m-ev_2 .body"))); err != nil || !strings.Contains(doc, "<strong>Two</strong>") {
		t.Errorf("Two's body: %q (%v)", doc, err)
	}
	browser.Shot(t, ctx, "inbox-page")

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#m-ev_2 button[aria-label^="Mark read"]`))); err != nil {
		t.Fatal(err)
	}
	pageIs("the page after Mark read", shown{url: page, count: "2 unread", items: "ev_3=Mark read*|ev_2=Mark unread|ev_1=Mark read*"})
	if got := serverCount(t, c, ana); got != `{"unread":2}` {
		t.Errorf("the server's count after the read: %s", got)
	}

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`nav form button`))); err != nil {
		t.Fatal(err)
	}
	pageIs("the page after Mark all read", shown{url: page, count: "none", items: "ev_3=Mark unread|ev_2=Mark unread|ev_1=Mark unread"})
	if got := serverCount(t, c, ana); got != `{"unread":0}` {
		t.Errorf("the server's count after mark all read: %s", got)
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
