package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// walkLogo is the newsletter's logo: a wide mark, so a layout that lets
// it push the mail wider than a phone would show.
const walkLogo = `<svg xmlns="http://www.w3.org/2000/svg" width="480" height="80" viewBox="0 0 480 80">` +
	`<rect width="480" height="80" rx="12" fill="#0b7a75"/><text x="24" y="52" font-family="sans-serif" font-size="36" fill="#fff">Field Notes</text></svg>`

// devMail is a mail as the dev mailbox's JSON gives it.
type devMail struct {
	Kind, To, Subject, Text, HTML string
}

// devMails are the dev mailbox's mails, newest first.
func devMails(t *testing.T, base string) []devMail {
	t.Helper()
	resp, err := http.Get(base + "/dev/mailbox?format=json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []devMail
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("the dev mailbox: %v", err)
	}
	return out
}

// waitDevMail waits for a mail to to whose kind or subject is what.
func waitDevMail(t *testing.T, base, to, what string) devMail {
	t.Helper()
	var found devMail
	poll.True(t, poll.BusyMachine, fmt.Sprintf("the mail %q to %s in the dev mailbox", what, to), func() bool {
		for _, m := range devMails(t, base) {
			if strings.Contains(m.To, to) && (m.Subject == what || m.Kind == what) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// totpCode is the authenticator's code for secret at at, as an app
// computes it from the secret the invite page shows (RFC 6238: 30 s
// steps, 6 digits, SHA-1).
func totpCode(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	code, err := totp.GenerateCodeCustom(secret, at, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// TestPublisherWalkInChromium is issue #33's walk, in Chromium against
// `newsletter serve` (embedded Redis, the dev mailbox), as a new
// publisher makes the newsletter theirs without a restart: the name,
// logo, accent colour and postal address in the settings; a topic and a
// sequence step written in the console; the signup form shows both; a
// reader subscribes through it and confirms from the dev mailbox; the
// step's mail carries the name, logo, colour and address and reads on a
// 375 px phone without sideways scrolling; an issue sent to the new topic
// is in the archive and its Atom feed under the newsletter's name; a
// colleague invited as an editor sets a password and an authenticator
// code from the invite's mail, signs in with both, and has the editor's
// screens and not the admin's. With NEWSLETTER_E2E_SCREENSHOTS set it
// saves the screenshots (docs/screenshots/walk-*.png).
func TestPublisherWalkInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("a browser walk through a running service: not under -short")
	}
	parallel(t) // an embedded Redis of its own, first: the browser's deadline runs from its making
	// The logo is on https (the settings want it so): a server of the
	// test's own, whose certificate the browser is told to take.
	logoSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		io.WriteString(w, walkLogo)
	}))
	t.Cleanup(logoSrv.Close)
	logoURL := logoSrv.URL + "/logo.svg"
	b := newConsoleBrowser(t, chromedp.Flag("ignore-certificate-errors", true))
	const adminTok = "walk-admin-token-0123456789"
	svc := startService(t, map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": adminTok, "NEWSLETTER_WELCOME_DELAY": "1s", "NEWSLETTER_POLL_INTERVAL": "50ms",
	}, "serve")
	base := svc.base
	const (
		name    = "Field Notes"
		accent  = "#0b7a75"
		postal  = "12 Harbour Road, Portsmouth PO1 2AB, United Kingdom"
		reader  = "reader@example.org"
		subject = "Your field guide"
	)

	// 1. The settings: name, logo, colour, postal address.
	b.signIn(base, adminTok, "admin-token")
	b.open(base, "/admin/settings", "Settings")
	b.do(chromedp.SetValue(chromedp.ID("name"), name), chromedp.SetValue(chromedp.ID("logo_url"), logoURL),
		chromedp.SetValue(chromedp.ID("accent"), accent), chromedp.SetValue(chromedp.ID("postal_address"), postal),
		chromedp.Click(chromedp.CSS(`#settings button[type=submit]`)))
	b.notice("Saved.")
	// A wait, not one reading: under load the notice was read while the
	// page after the save was still being put in place, and the form's
	// fields were not there yet.
	b.until("the saved settings in the form", fmt.Sprintf(`((document.getElementById("name")||{}).value + "|" + (document.getElementById("accent")||{}).value) === %q`, name+"|"+accent))
	b.shot("walk-settings")

	// 2. A topic, in the console.
	b.open(base, "/admin/topics", "Topics")
	b.do(chromedp.SendKeys(chromedp.ID("id"), "field-trips"), chromedp.SendKeys(chromedp.ID("name"), "Field trips"),
		chromedp.SendKeys(chromedp.ID("description"), "Where we go next, a week ahead."),
		chromedp.Click(chromedp.CSS(`#topic-add button[type=submit]`)))
	b.notice("The topic was added")
	if got := b.text(`tr[data-topic="field-trips"] td:nth-child(2)`); got != "Field trips" {
		t.Fatalf("the list shows the new topic as %q", got)
	}
	b.shot("walk-topics")

	// 3. A step of the sequence: a subject and a Markdown body.
	b.open(base, "/admin/sequence", "Sequence")
	b.do(chromedp.SendKeys(chromedp.ID("step-new-template"), "field-guide"), chromedp.SendKeys(chromedp.ID("step-new-after"), "3s"),
		chromedp.SendKeys(chromedp.ID("step-new-subject"), subject),
		chromedp.SetValue(chromedp.ID("step-new-body"), "# Welcome aboard\n\nHere is **your field guide**: what to pack, where we meet, "+
			"and [the map](https://example.com/map).\n\n- Boots\n- A flask\n- Curiosity"),
		chromedp.Click(chromedp.CSS(`#sequence button[type=submit]`)))
	b.notice("The sequence was saved")
	if got := b.eval(`document.getElementById("step-1-template").value + " " + document.getElementById("step-1-after").value`); got != "field-guide 3s" {
		t.Fatalf("the saved sequence's second step reads %q", got)
	}
	b.fullShot("walk-sequence")
	// The step is among the mail templates, written on the Sequence page.
	b.open(base, "/admin/templates", "Mail templates")
	if got := b.text(`tr[data-template="field-guide"] td:nth-child(3)`); got != "written on the Sequence page" {
		t.Fatalf("the templates list the step as %q", got)
	}
	b.open(base, "/admin/templates/welcome", "Template welcome")
	if got := b.eval(`document.getElementById("text").value`); !strings.HasPrefix(got, `{{define "subject"}}Welcome to`) {
		t.Fatalf("the welcome's text part reads %q", got)
	}
	b.shot("walk-templates")
	b.mu.Lock()
	if len(b.problems) > 0 {
		b.mu.Unlock()
		t.Fatalf("the console's pages made the browser report: %q", b.problems)
	}
	b.mu.Unlock()

	// 4. The signup form: the name and the new topic, no restart.
	b.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("email")))
	b.heading("Subscribe to " + name)
	if got := b.text(`label[for="topic-field-trips"]`); !strings.Contains(got, "Field trips") {
		t.Fatalf("the form's new topic reads %q", got)
	}
	b.do(chromedp.SendKeys(chromedp.ID("email"), reader), chromedp.Click(chromedp.ID("topic-field-trips")))
	b.shot("walk-form")
	b.do(chromedp.Click(chromedp.CSS(`button[type="submit"]`)))
	b.heading("Check your inbox")

	// 5. Confirm from the dev mailbox.
	waitDevMail(t, base, reader, "confirm")
	b.do(chromedp.Navigate(base+"/dev/mailbox"), chromedp.WaitVisible(chromedp.CSS(`a[href*="/confirm?token="]`)),
		chromedp.Click(chromedp.CSS(`a[href*="/confirm?token="]`)))
	b.heading("Confirm your subscription")
	b.do(chromedp.Click(chromedp.CSS(`form[action="/confirm"] button`)))
	b.heading("Subscription confirmed")

	// 6. The welcome, then the step: the newsletter's name, logo, colour
	// and address.
	if w := waitDevMail(t, base, reader, "Welcome to "+name); !strings.Contains(w.HTML, postal) {
		t.Fatalf("the welcome lacks the postal address:\n%s", w.HTML)
	}
	step := waitDevMail(t, base, reader, subject)
	for _, want := range []string{name, `src="` + logoURL + `"`, "color:" + accent, postal, "<strong>your field guide</strong>"} {
		if !strings.Contains(step.HTML, want) {
			t.Fatalf("the step's HTML lacks %q:\n%s", want, step.HTML)
		}
	}
	if !strings.Contains(step.Text, postal) || !strings.Contains(step.Text, "your field guide") {
		t.Fatalf("the step's text part:\n%s", step.Text)
	}

	// 7. That mail on a phone: 375 px, nothing scrolls sideways.
	mailSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, step.HTML)
	}))
	t.Cleanup(mailSrv.Close)
	phone, closePhone := chromedp.NewContext(b.ctx)
	defer closePhone()
	if err := chromedp.Do(phone, chromedp.EmulateViewport(375, 812), chromedp.Navigate(mailSrv.URL+"/mail"), chromedp.WaitVisible(chromedp.CSS(".nl-card"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(phone, chromedp.Poll[bool](`(() => { const i = document.querySelector("img.nl-logo"); return i.complete && i.naturalWidth > 0 })()`)); err != nil {
		t.Fatalf("the logo did not load in the mail: %v", err)
	}
	layout, err := chromedp.Run(phone, chromedp.Evaluate[struct{ Viewport, Scroll, Card float64 }](`({Viewport: document.documentElement.clientWidth,
		Scroll: document.documentElement.scrollWidth, Card: document.querySelector(".nl-card").getBoundingClientRect().width})`))
	if err != nil {
		t.Fatal(err)
	}
	if layout.Viewport != 375 || layout.Scroll > 375 || layout.Card > 375 {
		t.Fatalf("at 375 px the mail is %v px wide (card %v) in a %v px viewport: it scrolls sideways", layout.Scroll, layout.Card, layout.Viewport)
	}
	if got, err := chromedp.Run(phone, chromedp.Evaluate[string](`getComputedStyle(document.querySelector(".nl-head p")).color`)); err != nil || got != "rgb(11, 122, 117)" {
		t.Fatalf("the name in the mail's head is %q (%v), want the accent colour", got, err)
	}
	browserShot(t, phone, "walk-mail-375")
	closePhone()

	// 8. An issue to the new topic: the archive and its feed carry the
	// newsletter's name.
	b.open(base, "/admin/issues/new", "New issue")
	for _, id := range []string{"topic-digest", "topic-updates"} {
		if b.eval(`String(document.getElementById("`+id+`").checked)`) == "true" {
			b.do(chromedp.Click(chromedp.ID(id)))
		}
	}
	b.do(chromedp.Click(chromedp.ID("topic-field-trips")), chromedp.SendKeys(chromedp.ID("subject"), "First trip: the salt marsh"),
		chromedp.SetValue(chromedp.ID("body"), "We meet at the harbour at **nine**. Bring boots.\n\nThe tide turns at noon."),
		chromedp.Click(chromedp.CSS(`#editor button[type=submit]:not([formaction])`)))
	b.heading("First trip: the salt marsh draft")
	// Sending asks when (no default) and confirms on a page of its own
	// with the readers counted (issue #46).
	b.do(chromedp.Click(chromedp.ID("when-now")), chromedp.Click(chromedp.CSS(`form[action$="/send/review"] button`)))
	b.do(chromedp.Click(chromedp.CSS(`[data-confirm] form[action$="/send"] button[type=submit]`)))
	b.notice("Sending has started.")
	b.heading("First trip: the salt marsh sent")
	waitDevMail(t, base, reader, "First trip: the salt marsh")
	poll.True(t, poll.BusyMachine, "the issue in the archive", func() bool {
		code, body := getPublic(t, base+"/archive")
		return code == http.StatusOK && strings.Contains(body, "First trip: the salt marsh")
	})
	b.do(chromedp.Navigate(base + "/archive"))
	b.heading("Archive")
	if got := b.text("header.site strong"); got != name {
		t.Fatalf("the archive's header names %q", got)
	}
	if got := b.eval(`document.title + "|" + (document.querySelector('link[rel="alternate"][type="application/atom+xml"]') || {}).title`); got != "Archive · "+name+"|"+name {
		t.Fatalf("the archive's title and feed link: %q", got)
	}
	b.until("the archive's logo", `(() => { const i = document.querySelector("img.nl-logo"); return i !== null && i.complete && i.naturalWidth > 0 })()`)
	b.until("the issue in the archive page", `document.querySelector("main").textContent.includes("First trip: the salt marsh")`)
	b.shot("walk-archive")
	code, feed := getPublic(t, base+"/archive/feed.atom")
	if code != http.StatusOK || !strings.Contains(feed, "<title>"+name+"</title>") || !strings.Contains(feed, "First trip: the salt marsh") {
		t.Fatalf("the Atom feed: %d\n%s", code, feed)
	}

	// 9. A colleague, invited as an editor.
	b.open(base, "/admin/accounts", "Accounts")
	b.do(chromedp.SendKeys(chromedp.ID("email"), "colleague@example.org"), chromedp.SetValue(chromedp.ID("role"), "editor"),
		chromedp.Click(chromedp.CSS(`form[action="/admin/accounts"] button`)))
	b.notice("The invite was mailed")
	b.signOut()
	var link string
	poll.True(t, poll.BusyMachine, "the invite in the dev mailbox", func() bool {
		for _, m := range devMails(t, base) {
			if strings.Contains(m.To, "colleague@example.org") && m.Kind == "invite" {
				link = inviteLink.FindString(m.Text)
				return link != ""
			}
		}
		return false
	})
	if !strings.HasPrefix(link, base+"/admin/invite/") {
		t.Fatalf("the invite's link %q is not the service's", link)
	}

	// A fresh browser: the colleague's.
	c := newConsoleBrowser(t, chromedp.Flag("ignore-certificate-errors", true))
	const password = "salt marsh at nine, bring boots"
	c.do(chromedp.Navigate(link))
	c.heading("Join the newsletter console")
	secret := c.text("#totp-secret")
	c.do(chromedp.SendKeys(chromedp.ID("password"), password), chromedp.SendKeys(chromedp.ID("repeat"), password))
	c.shot("walk-invite")
	// The code is taken as it is typed, just before the form goes: on a
	// busy machine the screenshot above can take longer than a step.
	joined := time.Now()
	c.do(chromedp.SendKeys(chromedp.ID("code"), totpCode(t, secret, joined)), chromedp.Click(chromedp.CSS(`main form button[type=submit]`)))
	c.heading("Your recovery codes")
	c.do(chromedp.Click(chromedp.CSS(`main a[href="/admin/"]`)))
	c.heading("Overview")
	c.signOut()
	// Signing in again: the address, the password and a code of a later
	// step than the invite's (that one is spent): the step of now if the
	// walk has got that far, else the next one (a code one step ahead is
	// taken, for a clock a little off).
	next := time.Now()
	if next.Unix()/30 <= joined.Unix()/30 {
		next = joined.Add(30 * time.Second)
	}
	c.do(chromedp.Navigate(base+"/admin/login"), chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), "colleague@example.org"), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.SendKeys(chromedp.ID("code"), totpCode(t, secret, next)),
		chromedp.Click(chromedp.CSS(`#account-login button[type=submit]`)))
	c.heading("Overview")
	if who := c.text("header .who strong"); who != "colleague@example.org" || !strings.Contains(c.text("header .who"), "(editor)") {
		t.Fatalf("signed in as %q", c.text("header .who"))
	}
	if c.eval(`String(document.querySelector('a[href="/admin/settings"]') === null && document.querySelector('a[href="/admin/accounts"]') === null)`) != "true" {
		t.Fatal("an editor is offered the admin's screens")
	}
	c.open(base, "/admin/issues", "Issues")
	c.open(base, "/admin/topics", "Topics")
	if c.eval(`String(document.getElementById("topic-add") === null)`) != "true" {
		t.Fatal("an editor is offered the form that adds a topic")
	}
	c.open(base, "/admin/issues/new", "New issue")
	c.shot("walk-editor")
	c.open(base, "/admin/settings", "Not allowed")
	c.expectProblem("403 (Forbidden)")
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.problems) > 0 {
		t.Fatalf("the colleague's browser reported: %q", c.problems)
	}
}

// getPublic reads a public page.
func getPublic(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// browserShot saves a tab's screenshot as the walk's others are.
func browserShot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	browser{t: t, ctx: ctx}.shot(name)
}
