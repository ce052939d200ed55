package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// chromePath finds the system browser (Debian's chromium). The test never
// downloads one.
func chromePath() string {
	if p := os.Getenv("NEWSLETTER_E2E_CHROME"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func newBrowser(t *testing.T) context.Context {
	t.Helper()
	chrome := chromePath()
	if chrome == "" {
		t.Skip("no chromium on this machine: `apt-get install chromium` (CI installs it) or set NEWSLETTER_E2E_CHROME")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(420, 900), // a phone
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// waitMail polls the dev mailbox until its newest mail is of kind.
func waitMail(t *testing.T, base, kind string) {
	t.Helper()
	poll.True(t, poll.BusyMachine, "a "+kind+" mail in the dev mailbox", func() bool {
		resp, err := http.Get(base + "/dev/mailbox?format=json")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var mails []struct{ Kind string }
		json.NewDecoder(resp.Body).Decode(&mails)
		return len(mails) > 0 && mails[0].Kind == kind
	})
}

// browser runs steps in one tab and fails the test on the first error.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func (b browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

func (b browser) text(css string) string {
	b.t.Helper()
	// chromedp waits for the element without end: bound it, so a
	// selector that matches nothing fails by name, not as the walk's
	// deadline.
	ctx, cancel := context.WithTimeout(b.ctx, poll.BusyMachine)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		b.t.Fatalf("the text of %s: %v", css, err)
	}
	return strings.TrimSpace(s)
}

// heading waits until the page's h1 reads want (a click's new page may not
// have replaced the old one yet) and fails with what it shows otherwise.
func (b browser) heading(want string) {
	b.t.Helper()
	poll.Until(b.t, poll.BusyMachine, func() error {
		got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(document.querySelector("h1") || {}).textContent || ""`))
		if err == nil && strings.TrimSpace(got) != want {
			err = fmt.Errorf("page heading %q, want %q", got, want)
		}
		return err
	})
}

// shot saves a screenshot when NEWSLETTER_E2E_SCREENSHOTS names a folder
// (how the guides' pictures are made; an absolute folder).
func (b browser) shot(name string) {
	b.t.Helper()
	dir := os.Getenv("NEWSLETTER_E2E_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatal(err)
	}
	// go test runs in the package's folder: a relative folder is taken
	// from there, so a path that does not exist fails rather than
	// writing nothing.
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatalf("the screenshot %s: %v (NEWSLETTER_E2E_SCREENSHOTS wants an absolute folder, such as $PWD/docs/screenshots)", name, err)
	}
}

// TestE2ESignupInBrowser drives the pages as a person does, in headless
// Chromium: fill the form (the topics are plain checkboxes), submit, open
// the confirmation from the dev mailbox, confirm, open the preference
// centre from the welcome's footer, change the topics, and leave.
func TestE2ESignupInBrowser(t *testing.T) {
	parallel(t) // an embedded Redis of its own, first: the browser's deadline runs from its making
	b := browser{t: t, ctx: newBrowser(t)}
	svc := startService(t, map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": "e2e-admin-token-0123", "NEWSLETTER_WELCOME_DELAY": "1s", "NEWSLETTER_POLL_INTERVAL": "50ms",
	}, "serve")

	b.do(chromedp.Navigate(svc.base+"/"), chromedp.WaitVisible(chromedp.ID("email")))
	focused, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.activeElement.id`))
	if err != nil {
		t.Fatal(err)
	}
	if label := b.text(`label[for="email"]`); label != "E-mail address" || focused != "email" {
		t.Fatalf("form: label %q, focus on %q", label, focused)
	}
	b.shot("1-form")
	b.do(
		chromedp.SendKeys(chromedp.ID("email"), "Reader@Example.com"),
		chromedp.SendKeys(chromedp.ID("timezone"), "Europe/Berlin"),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
	)
	b.heading("Check your inbox")
	b.shot("2-check-inbox")

	// The confirmation, as the dev mailbox shows it (a static page: open
	// it once the worker has delivered).
	waitMail(t, svc.base, "confirm")
	b.do(chromedp.Navigate(svc.base+"/dev/mailbox"), chromedp.WaitVisible(chromedp.CSS(`a[href*="/confirm?token="]`)))
	b.shot("3-mailbox")
	b.do(chromedp.Click(chromedp.CSS(`a[href*="/confirm?token="]`)))
	// The link opens a page; only its button confirms (link scanners
	// only fetch).
	b.heading("Confirm your subscription")
	b.do(chromedp.Click(chromedp.CSS(`form[action="/confirm"] button`)))
	b.heading("Subscription confirmed")
	if body := b.text("main"); !strings.Contains(body, "reader@example.com") {
		t.Fatalf("confirm page: %q", body)
	}
	b.shot("4-confirmed")

	// The welcome arrives after the delay. Its footer opens the
	// preference centre: the topics as ticked boxes, name and time zone.
	waitMail(t, svc.base, "welcome")
	link := chromedp.CSS(`article[data-kind="welcome"] a[href*="/preferences?token="]`)
	b.do(chromedp.Navigate(svc.base+"/dev/mailbox"), chromedp.WaitVisible(link), chromedp.Click(link))
	b.heading("Your preferences")
	status := func() string {
		req, _ := http.NewRequest("GET", svc.base+"/api/subscribers/reader@example.com", nil)
		req.Header.Set("Authorization", "Bearer e2e-admin-token-0123")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s struct {
			Status, Timezone string
			Topics           []string
		}
		json.NewDecoder(resp.Body).Decode(&s)
		return s.Status + " " + s.Timezone + " " + strings.Join(s.Topics, ",")
	}
	if got := status(); got != "active Europe/Berlin digest,updates" {
		t.Fatalf("opening the preference centre changed the subscription: %q", got)
	}
	checked := func(id string) bool {
		on, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.getElementById(`+strconv.Quote(id)+`).checked`))
		if err != nil {
			t.Fatal(err)
		}
		return on
	}
	if !checked("topic-digest") || !checked("topic-updates") {
		t.Fatal("the preference centre does not show the reader's topics ticked")
	}
	b.shot("5-preferences")
	// Untick the updates, save: the digest goes on.
	b.do(chromedp.Click(chromedp.ID("topic-updates")), chromedp.Click(chromedp.CSS(`form[action="/preferences"] button[type="submit"]:not(.secondary)`)))
	poll.True(t, poll.BusyMachine, "the saved preferences", func() bool { return status() == "active Europe/Berlin digest" })
	// The choice is saved before the page that says so has replaced the
	// form (a node read from the old page is gone): wait for the new one.
	poll.Until(t, poll.BusyMachine, func() error {
		got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`((document.querySelector(".saved") || {}).textContent || "").trim()`))
		if err == nil && got != "Saved." {
			err = fmt.Errorf("the page after saving shows %q where it says Saved.", got)
		}
		return err
	})
	if checked("topic-updates") {
		t.Fatal("the page after saving does not show the new choice")
	}
	// One button leaves everything.
	b.do(chromedp.Click(chromedp.CSS("form.leave button")))
	b.heading("You are unsubscribed")
	if got := status(); got != "unsubscribed Europe/Berlin " {
		t.Fatalf("after leaving: %q", got)
	}
	b.shot("6-unsubscribed")

	// A bad link shows the shared bad-token page.
	b.do(chromedp.Navigate(svc.base + "/confirm?token=nope"))
	b.heading("This link is not valid")

	// The operator's view, for the guides' picture.
	if os.Getenv("NEWSLETTER_E2E_SCREENSHOTS") != "" {
		u := strings.Replace(svc.base, "http://", "http://admin:e2e-admin-token-0123@", 1)
		b.do(chromedp.EmulateViewport(1280, 860), chromedp.Navigate(u+"/monitoring/"),
			chromedp.WaitVisible(chromedp.CSS("table")), chromedp.Sleep(2*time.Second)) // let the charts draw: a picture, not an assertion
		b.shot("asynqmon")
	}
}
