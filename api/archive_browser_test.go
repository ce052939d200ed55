package api_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromium is Debian's browser (NEWSLETTER_E2E_CHROME to name another);
// the test never downloads one.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NEWSLETTER_E2E_CHROME"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on this machine: `apt-get install chromium` (CI installs it) or set NEWSLETTER_E2E_CHROME")
	return ""
}

// TestArchivePagesLoadInChromiumWithoutErrors opens the list and an issue
// in a real browser: no console error, no CSP violation, no script error,
// the heading and body shown and the writer's script inert.
func TestArchivePagesLoadInChromiumWithoutErrors(t *testing.T) {
	chrome := chromium(t)
	e := newArchiveEnv(t)
	e.seed(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(420, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })

	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
				problems = append(problems, string(ev.Entry.Source)+": "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				problems = append(problems, "console."+string(ev.Type))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+ev.ExceptionDetails.Text)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, h1, text string }{
		{"/archive", "Archive", "Second letter"},
		{"/archive/first-letter", "First letter", "Hello readers, see our site."},
		{"/archive/second-letter", "Second letter", "<script>alert(1)</script>"},
		// The home's parts: a topic's page and a year's, each with the
		// subscribe box.
		{"/archive/topic/updates", "Product updates", "Subscribe to Example News"},
		{"/archive?year=2026", "Archive 2026", "First letter"},
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+c.path), chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
			t.Fatal(err)
		}
		h1, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1")))
		if err != nil || strings.TrimSpace(h1) != c.h1 {
			t.Fatalf("%s: h1 %q %v", c.path, h1, err)
		}
		main, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil || !strings.Contains(main, c.text) {
			t.Fatalf("%s: page reads %q, want %q (%v)", c.path, main, c.text, err)
		}
		// The writer's markup is text: no script element, no image.
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("main script, main img, a[href^='javascript:']").length`))
		if err != nil || n != 0 {
			t.Fatalf("%s: %d active elements (%v)", c.path, n, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("the browser reported:\n%s", strings.Join(problems, "\n"))
	}
}
