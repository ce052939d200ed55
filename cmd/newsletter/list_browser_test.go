package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
)

// TestListInChromium walks the subscribers screen as an admin in
// Debian's Chromium over `newsletter serve` (its worker runs the jobs):
// a search by the beginning of a name with its total, an addition without
// double opt-in (its reason on the person's page), an edit, a bulk
// unsubscribe of the people ticked, an erasure of a filter asked twice,
// and an export from its progress page to the downloaded CSV. With
// NEWSLETTER_E2E_SCREENSHOTS set it saves the guide's screenshots there.
func TestListInChromium(t *testing.T) {
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
	names := []string{"Ann Lind", "Ravi Shah", "Mia Berg", "Tom Okafor", "Lena Vogel"}
	for i := range 20 {
		if _, err := st.Subscribe(ctx, store.SubscribeRequest{Email: fmt.Sprintf("reader%02d@example.org", i), Name: names[i%5],
			Activate: true, Topics: []string{"digest"}, Source: store.SourceForm}); err != nil {
			t.Fatal(err)
		}
	}
	const adminTok = "list-admin-token-0123456"
	svc := startService(t, realEnv(redisURL, smtpSrv.URL(), map[string]string{
		"NEWSLETTER_ADMIN_TOKEN": adminTok, "NEWSLETTER_FROM": "News <news@example.com>",
	}), "serve")
	base := svc.base
	b.signIn(base, adminTok, "admin-token")

	// Search.
	b.open(base, "/admin/subscribers", "Subscribers")
	b.do(chromedp.SendKeys(chromedp.ID("q"), "LIN"), chromedp.Click(chromedp.CSS(`#prefix-search button`)))
	b.until("the search's total", `((document.querySelector("[data-field=total]")||{}).textContent||"").includes("4 matches")`)
	if n := b.eval(`String(document.querySelectorAll("main table tbody tr").length)`); n != "4" {
		t.Fatalf("the search lists %s people, want 4", n)
	}
	b.shot("console-list-search")

	// Add without double opt-in: the reason is kept.
	b.open(base, "/admin/subscribers", "Subscribers")
	b.do(chromedp.SendKeys(chromedp.ID("add-email"), "fair@example.com"), chromedp.SendKeys(chromedp.ID("add-name"), `Jo "Fair" Doe`),
		chromedp.SendKeys(chromedp.ID("add-tz"), "Europe/Oslo"), chromedp.Click(chromedp.ID("add-optin")),
		chromedp.SendKeys(chromedp.ID("add-reason"), "signed the paper list at the fair"))
	b.shot("console-list-add")
	b.do(chromedp.Click(chromedp.CSS(`#add button`)))
	b.heading("fair@example.com active")
	b.notice("The person was added.")
	if got := b.text(`[data-field=consent]`); !strings.Contains(got, "signed the paper list at the fair") || !strings.Contains(got, "admin-token") {
		t.Fatalf("the consent shown: %q", got)
	}

	// Edit the name and the time zone.
	b.do(chromedp.SetValue(chromedp.ID("edit-name"), "Jo Doe-Fair"), chromedp.SetValue(chromedp.ID("edit-tz"), "Asia/Tokyo"))
	b.fullShot("console-list-edit")
	b.do(chromedp.Click(chromedp.CSS(`#edit button`)))
	b.notice("The changes were saved.")
	if fair, err := st.Get(ctx, "fair@example.com"); err != nil || fair.Name != "Jo Doe-Fair" || fair.Timezone != "Asia/Tokyo" {
		t.Fatalf("after the edit: %+v %v", fair, err)
	}

	// Bulk: unsubscribe the two people ticked.
	b.open(base, "/admin/subscribers?q=ravi", "Subscribers")
	b.do(chromedp.Click(chromedp.CSS(`input[value="reader01@example.org"]`)), chromedp.Click(chromedp.CSS(`input[value="reader06@example.org"]`)),
		chromedp.SetValue(chromedp.ID("action"), "unsubscribe"))
	b.shot("console-list-bulk")
	b.do(chromedp.Click(chromedp.CSS(`#bulk button`)))
	b.notice("The action was applied")
	for _, e := range []string{"reader01@example.org", "reader06@example.org"} {
		if s, _ := st.Get(ctx, e); s.Status != store.Unsubscribed {
			t.Fatalf("%s is %s", e, s.Status)
		}
	}

	// Erase everyone unsubscribed: asked again with the count, then a
	// job whose page follows it to the end.
	b.open(base, "/admin/subscribers?status=unsubscribed", "Subscribers")
	b.do(chromedp.SetValue(chromedp.ID("scope"), "filter"), chromedp.SetValue(chromedp.ID("action"), "erase"), chromedp.Click(chromedp.CSS(`#bulk button`)))
	b.heading("Erase 2 people?")
	b.shot("console-list-erase-confirm")
	b.do(chromedp.SendKeys(chromedp.ID("confirm"), "2"), chromedp.Click(chromedp.CSS(`button.danger`)))
	b.heading("Bulk action: Erase for good")
	b.until("the erasure's end", `((document.querySelector("[data-field=state]")||{}).textContent||"") === "done"`)
	if _, err := st.Get(ctx, "reader06@example.org"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("reader06 after the erasure: %v", err)
	}

	// Export the active people: the progress page, then the download.
	downloads := t.TempDir()
	if _, err := chromedp.Call(b.ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
		t.Fatal(err)
	}
	b.open(base, "/admin/subscribers?status=active", "Subscribers")
	b.do(chromedp.Click(chromedp.ID("export")))
	b.heading("Export")
	b.until("the export's end", `document.querySelector("#download") !== null`)
	b.shot("console-list-export")
	b.do(chromedp.Click(chromedp.ID("download")))
	var csv string
	poll.Until(t, poll.BusyMachine, func() error {
		files, err := filepath.Glob(filepath.Join(downloads, "subscribers-*.csv"))
		if err != nil || len(files) != 1 {
			return fmt.Errorf("downloads %v %v", files, err)
		}
		raw, err := os.ReadFile(files[0])
		csv = string(raw)
		return err
	})
	if !strings.HasPrefix(csv, "email,name,timezone,topics,tags,status") || strings.Count(csv, "\n") != 20 || !strings.Contains(csv, "Jo Doe-Fair") {
		t.Fatalf("the CSV (want a header and 19 people):\n%s", csv)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		t.Fatalf("the browser reported: %q", b.problems)
	}
}
