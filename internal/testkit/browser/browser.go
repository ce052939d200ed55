// Package browser starts Debian's Chromium (never a downloaded one) for
// tests that look at a page as a person's browser shows it, and saves
// their screenshots for the guides.
package browser

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// EnvChrome names another browser binary; EnvScreenshots an absolute
// folder the screenshots are written to (none without it).
const (
	EnvChrome      = "NEWSLETTER_E2E_CHROME"
	EnvScreenshots = "NEWSLETTER_E2E_SCREENSHOTS"
)

// Path is the browser the tests use, or "" when the machine has none.
func Path() string {
	if p := os.Getenv(EnvChrome); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// New starts a headless browser with a window of width × height and
// skips the test when the machine has none. It ends with the test. more
// are further flags (such as accepting a local TLS test server's
// certificate).
func New(t testing.TB, width, height int, more ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	chrome := Path()
	if chrome == "" {
		t.Skip("no chromium on this machine: `apt-get install chromium` (CI installs it) or set " + EnvChrome)
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
		chromedp.WindowSize(width, height),
	)
	opts = append(opts, more...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// Shot saves the page as name.png when EnvScreenshots names a folder
// (how the guides' pictures are made).
func Shot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatalf("the screenshot %s: %v (%s wants an absolute folder, such as $PWD/docs/screenshots)", name, err, EnvScreenshots)
	}
}
