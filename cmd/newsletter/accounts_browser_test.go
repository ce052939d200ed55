package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/services/accounts"
)

var inviteLink = regexp.MustCompile(`https?://\S+/admin/invite/[A-Za-z0-9_-]+`)

// TestAccountsInChromium walks an invite in Chromium over a real Redis,
// worker and SMTP server: an admin invites a colleague as an editor from
// the Accounts page; the invite arrives by mail; the colleague opens its
// link, is refused a common password, chooses a good one, sets up the
// authenticator (the test computes its codes from the secret the page
// shows), lands signed in as an editor with their recovery codes, has no
// admin screens, signs out and signs in again with password and code.
// With NEWSLETTER_E2E_SCREENSHOTS set it saves the guides' screenshots.
func TestAccountsInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("a browser walk through a running service: not under -short")
	}
	// Own first: it may pause the test (t.Parallel), and the browser's
	// deadline runs from its making.
	rdb, redisURL := redistest.Own(t, redistest.DBCommand)
	b := newConsoleBrowser(t)
	smtpSrv := smtptest.Start(t)
	st := versionedStore(t, rdb)
	const adminTok = "accounts-admin-token-0123"
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": adminTok, "NEWSLETTER_FROM": "News <news@example.com>",
	}), "serve")
	base := svc.base

	b.signIn(base, adminTok, "admin-token")
	b.open(base, "/admin/accounts", "Accounts")
	b.do(chromedp.SendKeys(chromedp.ID("email"), "ed@example.org"), chromedp.SetValue(chromedp.ID("role"), "editor"),
		chromedp.Click(chromedp.CSS(`form[action="/admin/accounts"] button`)))
	b.notice("The invite was mailed")
	b.shot("console-accounts")
	b.signOut()

	var link string
	poll.True(t, poll.BusyMachine, "the invite mail over SMTP", func() bool {
		m := smtpSrv.To("ed@example.org")
		if len(m) != 1 {
			return false
		}
		link = inviteLink.FindString(m[0].Text())
		return link != "" && strings.Contains(m[0].Text(), "as editor")
	})
	if !strings.HasPrefix(link, base+"/admin/invite/") {
		t.Fatalf("the link %q is not under the service's address %s", link, base)
	}

	// The invite page: a common password is refused, nothing is made.
	const password = "ed picks a long passphrase"
	b.do(chromedp.Navigate(link))
	b.heading("Join the newsletter console")
	secret := b.text("#totp-secret")
	// The app's link is a real otpauth:// link (it was #ZgotmplZ), and
	// the QR code shows: a data: image the page's CSP lets load.
	b.until("the QR code", `(()=>{const i=document.querySelector("#totp-qr");return !!i&&i.complete&&i.naturalWidth===200})()`)
	if href := b.eval(`document.querySelector("#totp-uri").getAttribute("href")`); !strings.HasPrefix(href, "otpauth://totp/") || !strings.Contains(href, "secret="+secret) {
		t.Fatalf("the authenticator link %q", href)
	}
	code := func(at time.Time) string {
		c, err := accounts.Code(secret, at)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	b.do(chromedp.SendKeys(chromedp.ID("password"), "qazwsxedcrfv"), chromedp.SendKeys(chromedp.ID("repeat"), "qazwsxedcrfv"),
		chromedp.SendKeys(chromedp.ID("code"), code(time.Now())), chromedp.Click(chromedp.CSS(`main form button[type=submit]`)))
	b.until("the refusal", `((document.querySelector(".error")||{}).textContent||"").includes("common password")`)
	b.expectProblem("400 (Bad Request)")
	if _, err := st.AccountByEmail(context.Background(), "ed@example.org"); err == nil {
		t.Fatal("an account was made with a common password")
	}
	// The form comes back empty (a password is never sent back).
	b.do(chromedp.SendKeys(chromedp.ID("password"), password), chromedp.SendKeys(chromedp.ID("repeat"), password),
		chromedp.SendKeys(chromedp.ID("code"), code(time.Now())))
	b.shot("console-invite")
	b.do(chromedp.Click(chromedp.CSS(`main form button[type=submit]`)))
	b.heading("Your recovery codes")
	if n := b.eval(`String(document.querySelectorAll("#recovery-codes li").length)`); n != "10" {
		t.Fatalf("%s recovery codes shown, want 10", n)
	}
	b.shot("console-recovery-codes")
	b.do(chromedp.Click(chromedp.CSS(`main a[href="/admin/"]`)))
	b.heading("Overview")
	if who := b.text("header .who strong"); who != "ed@example.org" {
		t.Fatalf("signed in as %q", who)
	}
	if b.eval(`String(document.querySelector('a[href="/admin/accounts"]') === null && document.querySelector('a[href="/admin/tokens"]') === null)`) != "true" {
		t.Fatal("an editor is offered the admin screens")
	}
	b.open(base, "/admin/issues/new", "New issue")
	b.signOut()

	// Again with the password and a code: the next step's (the one the
	// invite used is spent; one step ahead is still accepted).
	b.do(chromedp.Navigate(base+"/admin/login"), chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), "ed@example.org"), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.SendKeys(chromedp.ID("code"), code(time.Now().Add(accounts.TOTPPeriod*time.Second))))
	b.shot("console-sign-in")
	b.do(chromedp.Click(chromedp.CSS(`#account-login button[type=submit]`)))
	b.heading("Overview")
	if who := b.text("header .who strong"); who != "ed@example.org" {
		t.Fatalf("signed in again as %q", who)
	}
	b.open(base, "/admin/account", "Your account")
	b.fullShot("console-account")
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		t.Fatalf("the browser reported: %q", b.problems)
	}
	if a, err := st.AccountByEmail(context.Background(), "ed@example.org"); err != nil || a.Role != "editor" || a.LastSignIn.IsZero() {
		t.Fatalf("the account: %+v %v", a, err)
	}
}
