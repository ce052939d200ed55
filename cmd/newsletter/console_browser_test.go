package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
)

// consoleBrowser is a desktop-sized Chromium tab that collects every
// console error, CSP violation and script exception of the pages.
type consoleBrowser struct {
	browser
	mu       sync.Mutex
	problems []string
}

// newConsoleBrowser starts the tab; extra adds flags to the browser's.
func newConsoleBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) *consoleBrowser {
	t.Helper()
	chrome := chromePath()
	if chrome == "" {
		t.Skip("no chromium on this machine: `apt-get install chromium` (CI installs it) or set NEWSLETTER_E2E_CHROME")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	opts = append(opts, extra...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*poll.BusyMachine)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	b := &consoleBrowser{browser: browser{t: t, ctx: ctx}}
	if err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
				b.problems = append(b.problems, string(ev.Entry.Source)+": "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				b.problems = append(b.problems, "console."+string(ev.Type))
			}
		case *runtime.EventExceptionThrown:
			b.problems = append(b.problems, "exception: "+ev.ExceptionDetails.Text)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	return b
}

// fullShot is shot of the whole page, beyond the window (a subscriber's
// page is taller than the screen).
func (b *consoleBrowser) fullShot(name string) {
	b.t.Helper()
	dir := os.Getenv("NEWSLETTER_E2E_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// expectProblem takes the one problem a step was meant to cause (a 403
// page is a failed load to the browser) off the list.
func (b *consoleBrowser) expectProblem(want string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, p := range b.problems {
		if strings.Contains(p, want) {
			b.problems = append(b.problems[:i], b.problems[i+1:]...)
			return
		}
	}
	b.t.Fatalf("the browser did not report %q; it reported %q", want, b.problems)
}

// eval runs a script in the page.
func (b *consoleBrowser) eval(js string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

// until waits for a script's truth, naming what it waited for.
func (b *consoleBrowser) until(what, js string) {
	b.t.Helper()
	poll.Until(b.t, poll.BusyMachine, func() error {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](js))
		if err == nil && !ok {
			// Not b.eval, which fails the test: the page may be
			// navigating to the one waited for ("Inspected target
			// navigated or closed"), and the wait goes on.
			page, perr := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.pathname + " " + ((document.querySelector("h1")||{}).textContent||"")`))
			if perr != nil {
				page = "(" + perr.Error() + ")"
			}
			err = fmt.Errorf("still waiting for %s (page %q)", what, page)
		}
		return err
	})
}

// notice waits for the page's notice to read want.
func (b *consoleBrowser) notice(want string) {
	b.t.Helper()
	b.until("the notice "+want, fmt.Sprintf(`((document.querySelector(".notice")||{}).textContent||"").includes(%q)`, want))
}

func (b *consoleBrowser) open(base, path, h1 string) {
	b.t.Helper()
	b.do(chromedp.Navigate(base + path))
	b.heading(h1)
}

func (b *consoleBrowser) signIn(base, token, name string) {
	b.t.Helper()
	b.do(chromedp.Navigate(base+"/admin/login"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.CSS(`#token-login button[type=submit]`)))
	b.heading("Overview")
	if who := b.text("header .who strong"); who != name {
		b.t.Fatalf("signed in as %q, want %q", who, name)
	}
}

func (b *consoleBrowser) signOut() {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.CSS(`header form button`)))
	b.heading("Newsletter console")
}

// TestConsoleInChromium walks the console in Debian's Chromium with each
// role, over a real Redis, worker and SMTP server: a viewer reads every
// screen and is refused the editor; an editor writes an issue with the
// live preview and a Reply-To, test-sends it (received over SMTP, the
// Reply-To in its header), sends it and watches the progress reach the
// end (every reader's mail with the Reply-To), previews it as a phone
// and duplicates it; an admin registers a webhook endpoint and sends it
// a test event, which arrives signed and shows among its deliveries; an admin reads the overview's counts and
// chart and the subscriber list, finds a subscriber and changes their
// topics, lifts a suppression, exports a person (the download) and
// erases them (then find says nobody), imports a CSV, makes a token and
// reads all of it in the audit log. With NEWSLETTER_E2E_SCREENSHOTS set
// it saves the guides' screenshots there.
func TestConsoleInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("a browser walk through a running service: not under -short")
	}
	// Own first: it may pause the test (t.Parallel), and the browser's
	// deadline runs from its making.
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	b := newConsoleBrowser(t)
	smtpSrv := smtptest.Start(t)
	st := versionedStore(t, rdb)
	ctx := context.Background()
	const adminTok, editorTok, viewerTok = "console-admin-token-0123", "console-editor-token-0123", "console-viewer-token-0123"
	for _, p := range []struct {
		tok  string
		name string
		role adminauth.Role
	}{{editorTok, "ed", adminauth.Editor}, {viewerTok, "vic", adminauth.Viewer}} {
		if _, err := st.CreateToken(ctx, adminauth.HashToken(p.tok), adminauth.StoredToken{Name: p.name, Role: p.role}); err != nil {
			t.Fatal(err)
		}
	}
	readers := []string{"ann@example.com"}
	for i := range 24 {
		readers = append(readers, fmt.Sprintf("reader%02d@example.org", i))
	}
	for i, e := range append(readers, "bob@example.net") {
		name := []string{"Ann Lind", "Ravi Shah", "Mia Berg", "Tom Okafor", "Lena Vogel"}[i%5]
		if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: e, Name: name, Activate: true, Topics: []string{"digest"}, Source: store.SourceForm}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.MarkBounced(ctx, "bob@example.net"); err != nil {
		t.Fatal(err)
	}
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": adminTok, "NEWSLETTER_FROM": "News <news@example.com>",
		"NEWSLETTER_TEST_RECIPIENTS": "me@example.com", "NEWSLETTER_WEBHOOK_ALLOW_PRIVATE": "true",
	}), "serve")
	base := svc.base

	// A viewer reads every screen, and is refused what an editor does.
	b.signIn(base, viewerTok, "vic")
	for _, s := range []struct{ path, h1 string }{
		{"/admin/subscribers", "Subscribers"}, {"/admin/issues", "Issues"}, {"/admin/items", "Items"}, {"/admin/suppressions", "Suppressions"},
	} {
		b.open(base, s.path, s.h1)
	}
	if b.eval(`String(document.querySelector('a[href="/admin/tokens"]') === null && document.querySelector('a[href="/admin/issues/new"]') === null)`) != "true" {
		t.Fatal("a viewer is offered the tokens or the editor")
	}
	b.open(base, "/admin/issues/new", "Not allowed")
	b.expectProblem("403 (Forbidden) " + base + "/admin/issues/new")
	b.signOut()

	// An editor writes an issue; the preview follows the typing.
	b.signIn(base, editorTok, "ed")
	b.open(base, "/admin/issues/new", "New issue")
	b.do(chromedp.SendKeys(chromedp.ID("subject"), "Spring letter"),
		chromedp.SendKeys(chromedp.ID("preheader"), "What grew this month"),
		chromedp.SendKeys(chromedp.ID("reply_to"), "letters@example.com"),
		chromedp.SendKeys(chromedp.ID("body"), "Hello **spring** readers.\n\n- [Our garden](https://example.com/garden)\n- New seeds\n\n<script>alert(1)</script>"))
	b.until("the live preview", `document.querySelector("iframe.preview").srcdoc.includes("<strong>spring</strong>")`)
	b.shot("console-issue-editor")
	b.do(chromedp.Click(chromedp.CSS(`#editor button[type=submit]:not([formaction])`)))
	b.heading("Spring letter draft")
	b.do(chromedp.SendKeys(chromedp.ID("emails"), "me@example.com"), chromedp.Click(chromedp.CSS(`form[action$="/test"] button`)))
	b.notice("The test mail was sent.")
	poll.True(t, poll.BusyMachine, "the test mail over SMTP", func() bool {
		m := smtpSrv.To("me@example.com")
		return len(m) == 1 && m[0].Header.Get("Subject") == "[Test] Spring letter" && strings.Trim(m[0].Header.Get("Reply-To"), "<>") == "letters@example.com"
	})
	issuePath := b.eval(`location.pathname`)
	// Sending asks when (no default) and confirms on a page of its own
	// with the readers counted (issue #46).
	b.do(chromedp.Click(chromedp.ID("when-now")), chromedp.Click(chromedp.CSS(`form[action$="/send/review"] button`)))
	b.do(chromedp.Click(chromedp.CSS(`[data-confirm] form[action$="/send"] button[type=submit]`)))
	b.notice("Sending has started.")
	// The page's script polls the progress and reloads once it is sent.
	b.heading("Spring letter sent")
	if got := b.text(`[data-field=sent]`); got != fmt.Sprint(len(readers)) {
		t.Fatalf("progress shows %s sent, want %d", got, len(readers))
	}
	b.shot("console-issue-progress")
	// Its report: every reader delivered, nothing back yet, the CSV a
	// download away.
	if got := b.text(`[data-report] [data-field=delivered]`); got != fmt.Sprint(len(readers)) {
		t.Fatalf("the report shows %s delivered, want %d", got, len(readers))
	}
	if got := b.text(`[data-report] [data-field=unsubscribed]`) + b.text(`[data-report] [data-field=bounced]`); got != "00" {
		t.Fatalf("the report shows unsubscribed and bounced %q before any", got)
	}
	if b.eval(`String(document.querySelector('[data-report] a[href$="/report.csv"]') !== null)`) != "true" {
		t.Fatal("the report has no CSV download")
	}
	b.fullShot("console-issue-report")
	for _, r := range readers {
		if n := len(smtpSrv.To(r)); n != 1 {
			t.Fatalf("%s got %d mails", r, n)
		} else if got := smtpSrv.To(r)[0].Header.Get("Reply-To"); strings.Trim(got, "<>") != "letters@example.com" {
			t.Fatalf("%s's mail: Reply-To %q", r, got)
		}
	}
	// The mail as a phone shows it; a copy of the issue to start the next.
	b.open(base, issuePath+"/preview?as=phone", "Preview of Spring letter")
	if w := b.eval(`String(document.querySelector("iframe[data-preview=phone]").getBoundingClientRect().width)`); w != "375" {
		t.Fatalf("the phone preview is %s px wide", w)
	}
	b.shot("console-issue-phone")
	b.open(base, issuePath, "Spring letter sent")
	b.do(chromedp.Click(chromedp.CSS(`form[action$="/duplicate"] button`)))
	b.heading("Spring letter (copy) draft")
	b.notice("This is a copy")
	if n := len(smtpSrv.To("bob@example.net")); n != 0 {
		t.Fatal("a bounced address was mailed")
	}
	b.signOut()

	// An admin (NEWSLETTER_ADMIN_TOKEN): the overview, a subscriber, a
	// suppression, an export and an erasure, an import, a token, the
	// audit log.
	seeded := seedPastDays(t, rdb)
	b.signIn(base, adminTok, "admin-token")
	stats, err := st.Stats(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.text(`a.tile[href="/admin/subscribers?status=active"] .n`); got != fmt.Sprint(stats.ByStatus[store.Active]) {
		t.Fatalf("the overview shows %s active, the store counts %d", got, stats.ByStatus[store.Active])
	}
	// The chart's description (what a screen reader says) sums each line.
	desc := b.eval(`document.querySelector("svg.chart desc").textContent`)
	m := regexp.MustCompile(`: (\d+) signups, `).FindStringSubmatch(desc)
	if m == nil {
		t.Fatalf("the chart's description: %q", desc)
	}
	if signups, _ := strconv.ParseInt(m[1], 10, 64); signups < seeded {
		t.Fatalf("the chart counts %d signups, want at least the %d seeded: %q", signups, seeded, desc)
	}
	// Each topic's growth: the digest's imports (40 a fortnight) beside
	// its form signups.
	if got := b.text(`[data-growth=digest]`); !regexp.MustCompile(`^[\d\x{202f}]+ form, 280 import, 0 API, 0 added by hand$`).MatchString(got) {
		t.Fatalf("the digest's growth: %q", got)
	}
	b.shot("console-overview")
	b.fullShot("console-overview-growth")
	b.open(base, "/admin/subscribers", "Subscribers")
	if n := b.eval(`String(document.querySelectorAll("main table tbody tr").length)`); n != fmt.Sprint(len(readers)+1) {
		t.Fatalf("the list shows %s people, want %d", n, len(readers)+1)
	}
	b.shot("console-subscribers")
	b.do(chromedp.SendKeys(chromedp.ID("email"), "Ann@Example.com"), chromedp.Click(chromedp.CSS(`form[role=search] button`)))
	b.heading("ann@example.com active")
	if u := b.eval(`location.href`); strings.Contains(u, "ann") || strings.Contains(strings.ToLower(b.eval(`document.title`)), "ann") {
		t.Fatalf("the address is in the URL or title: %s", u)
	}
	// One Topics box: the edit form's, which saves them with the name.
	b.do(chromedp.Click(chromedp.ID("edit-topic-updates")), chromedp.Click(chromedp.CSS(`#edit button[type=submit]`)))
	b.notice("The changes were saved.")
	if ann, err := st.Get(ctx, "ann@example.com"); err != nil || strings.Join(ann.Topics, ",") != "digest,updates" {
		t.Fatalf("ann's topics: %v %v", ann.Topics, err)
	}
	if got := b.text(`[data-field=mails]`); !strings.Contains(got, "issue ") {
		t.Fatalf("ann's mails: %q", got)
	}
	b.fullShot("console-subscriber")

	// An export is a download of the person's data; an erasure asks
	// for the word, then the person is gone.
	leaver, err := st.Get(ctx, "reader05@example.org")
	if err != nil {
		t.Fatal(err)
	}
	downloads := t.TempDir()
	if _, err := chromedp.Call(b.ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
		t.Fatal(err)
	}
	b.open(base, fmt.Sprintf("/admin/subscribers/%d", leaver.ID), "reader05@example.org active")
	b.do(chromedp.Click(chromedp.CSS(`form[action$="/export"] button`)))
	var export struct {
		Subscriber struct{ Email string }  `json:"subscriber"`
		Mails      []struct{ Kind string } `json:"mails_sent"`
	}
	poll.Until(t, poll.BusyMachine, func() error {
		raw, err := os.ReadFile(filepath.Join(downloads, fmt.Sprintf("subscriber-%d.json", leaver.ID)))
		if err != nil {
			return err
		}
		return json.Unmarshal(raw, &export)
	})
	if export.Subscriber.Email != "reader05@example.org" || !slices.ContainsFunc(export.Mails, func(m struct{ Kind string }) bool { return m.Kind == "issue" }) {
		t.Fatalf("the export: %+v", export)
	}
	b.do(chromedp.SendKeys(chromedp.ID("confirm"), "erase"), chromedp.Click(chromedp.CSS(`form[action$="/erase"] button`)))
	b.heading("Subscribers")
	b.notice("The person was erased")
	if _, err := st.Get(ctx, "reader05@example.org"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("reader05 after the erasure: %v", err)
	}
	b.do(chromedp.SendKeys(chromedp.ID("email"), "reader05@example.org"), chromedp.Click(chromedp.CSS(`form[role=search] button`)))
	b.until("find to say not found", `((document.querySelector(".error")||{}).textContent||"").includes("Nobody with that address")`)
	b.expectProblem("404 (Not Found) " + base + "/admin/subscribers/find")

	b.open(base, "/admin/suppressions", "Suppressions")
	b.shot("console-suppressions")
	b.do(chromedp.Click(chromedp.CSS(`form[action$="/lift"] button`)))
	b.notice("The suppression was lifted.")
	if bob, err := st.Get(ctx, "bob@example.net"); err != nil || bob.Status != store.Active {
		t.Fatalf("bob after the lift: %s %v", bob.Status, err)
	}

	csv := filepath.Join(t.TempDir(), "new-readers.csv")
	if err := os.WriteFile(csv, []byte("email,name,timezone,topics\ncara@example.com,Cara,Europe/Paris,digest\nnot-an-address,X\ndan@example.com,Dan,Mars/Base\neve@example.com,,,updates\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.open(base, "/admin/import", "Import")
	b.do(chromedp.SetUploadFiles(chromedp.ID("file"), []string{csv}), chromedp.Click(chromedp.CSS(`main form button[type=submit]`)))
	// The upload stops at the mapping step (the columns, read as our own,
	// and the first rows); the import runs once it is confirmed.
	b.heading("Import of new-readers.csv")
	b.until("the mapping step", `((document.querySelector("main form button[type=submit]")||{}).textContent||"") === "Import with this mapping"`)
	b.do(chromedp.Click(chromedp.CSS(`main form button[type=submit]`)))
	b.until("the import to end", `document.querySelector("[data-field=state]").textContent === "done"`)
	if got := b.text(`[data-field=rejected]`); !strings.Contains(got, "line 3: invalid address") || !strings.Contains(got, "line 4: unknown time zone Mars/Base") {
		t.Fatalf("rejected lines: %q", got)
	}
	if added := b.text(`[data-field=added]`); added != "2" {
		t.Fatalf("added %s, want 2", added)
	}
	b.shot("console-import")

	b.open(base, "/admin/tokens", "Tokens")
	b.do(chromedp.SendKeys(chromedp.ID("name"), "newsletter-ci"), chromedp.Click(chromedp.CSS(`form[action="/admin/tokens"] button`)))
	b.until("the new token", `document.getElementById("new-token") !== null`)
	b.shot("console-tokens")

	// A webhook endpoint, registered and sent a test event, which the
	// worker signs and posts; the page lists the delivery.
	hits := make(chan string, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.Header.Get("webhook-signature")
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	b.open(base, "/admin/webhooks", "Webhooks")
	b.do(chromedp.SendKeys(chromedp.ID("url"), hook.URL+"/crm"), chromedp.Click(chromedp.CSS(`input[name=events][value="issue.sent"]`)),
		chromedp.Click(chromedp.CSS(`form[action="/admin/webhooks"] button`)))
	b.until("the new endpoint's secret", `document.querySelector("[data-field=secret]") !== null`)
	b.do(chromedp.Click(chromedp.CSS(`form[action$="/test"] button`)))
	b.notice("A test event is queued")
	select {
	case sig := <-hits:
		if !strings.HasPrefix(sig, "v1,") {
			t.Fatalf("the test event's signature: %q", sig)
		}
	case <-time.After(poll.BusyMachine):
		t.Fatal("the test event never came")
	}
	poll.True(t, poll.BusyMachine, "the delivery on the page", func() bool {
		b.open(base, "/admin/webhooks", "Webhooks")
		return strings.Contains(b.text("main"), "webhook.test")
	})
	b.fullShot("console-webhooks")

	b.open(base, "/admin/audit", "Audit log")
	audit := b.text("main table")
	for _, want := range []string{"issue.created", "issue.test_sent", "issue.sent", "subscriber.changed", "suppression.lifted",
		"subscribers.imported", "token.created", "console.signed_in", "subscriber.exported", "subscriber.erased", "ed", "vic", "admin-token"} {
		if !strings.Contains(audit, want) {
			t.Fatalf("the audit log lacks %q:\n%s", want, audit)
		}
	}
	if strings.Contains(audit, "ann@example.com") || strings.Contains(audit, "bob@example.net") || strings.Contains(audit, "reader05") {
		t.Fatalf("the audit log names an address:\n%s", audit)
	}
	b.shot("console-audit")

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		t.Fatalf("the browser reported:\n%s", strings.Join(b.problems, "\n"))
	}
}

// seedPastDays writes 89 days of signups, confirmations and unsubscribes
// before today into the store's daily counters, so the overview's chart
// has a history to draw (the walk itself makes only today's). It writes
// the store's own keys (nl:day:YYYY-MM-DD, see store/keys.go): no store
// call backdates a signup. It returns the signups seeded.
func seedPastDays(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	today := time.Now().UTC()
	var signups int64
	p := rdb.Pipeline()
	for i := 1; i < 90; i++ {
		day := today.AddDate(0, 0, -i)
		n := int64(12 + (i*7)%11 + 6*((i/7)%3)) // a week-to-week wave, the same every run
		if day.Weekday() == time.Saturday || day.Weekday() == time.Sunday {
			n /= 2
		}
		// A day's counters are the sum over the shards' (store/keys.go's
		// sfxDay): shard 0's stand for them all here.
		// Each topic's growth by source (g:<source>:<topic>): the
		// confirmed signups on the form, an import every fortnight.
		imported := int64(0)
		if i%14 == 3 {
			imported = 40
		}
		p.HSet(context.Background(), "nl:{s00}:day:"+day.Format(time.DateOnly), "signup", n, "confirm", n*4/5, "unsubscribe", int64(1+i%4),
			"g:form:digest", n*4/5, "g:import:digest", imported, "g:api:updates", int64(i%3), "g:form:updates", n/4)
		signups += n
	}
	if _, err := p.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	return signups
}
