package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	headless "github.com/newsletter/newsletter/internal/testkit/browser"
	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// TestSettingsPageInChromium: an admin signs in, opens the settings in a
// real browser, fills in the form and saves; the settings are stored and
// the page says so.
func TestSettingsPageInChromium(t *testing.T) {
	e := newEnv(t)
	ctx := headless.New(t, 900, 1200)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/admin/login?next=/admin/settings"),
		chromedp.SendKeys(chromedp.CSS("#token"), adminToken),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#settings")),
	); err != nil {
		t.Fatal(err)
	}
	if h1, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1"))); err != nil || strings.TrimSpace(h1) != "Settings" {
		t.Fatalf("h1 %q %v", h1, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#name"), "Café Weekly"),
		chromedp.SetValue(chromedp.CSS("#postal_address"), "1 Bean Street"),
		chromedp.SetValue(chromedp.CSS("#accent"), "#aa3300"),
		chromedp.Submit(chromedp.CSS("#settings")),
	); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		if s, err := e.st.Settings(context.Background()); err != nil || s.Name != "Café Weekly" || s.Accent != "#aa3300" {
			return fmt.Errorf("saved %+v %v", s, err)
		}
		return nil
	})
	poll.Until(t, 30*time.Second, func() error {
		main, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil || !strings.Contains(main, "Saved.") {
			return fmt.Errorf("after the save the page reads %q (%v)", main, err)
		}
		return nil
	})
	headless.Shot(t, ctx, "settings")
}
