package api

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	headless "github.com/newsletter/newsletter/internal/testkit/browser"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/store"
)

// newLogoEnv is an API whose settings show a logo at logoURL.
func newLogoEnv(t *testing.T, logoURL string) *env {
	t.Helper()
	return newEnvWith(t, Config{DoubleOptIn: true}, func(d *Deps) {
		d.Settings = settings.Fixed(store.Settings{Name: "Café Weekly", LogoURL: logoURL})
	})
}

// imgSrc is the img-src directive of a Content-Security-Policy ("" : none).
func imgSrc(csp string) string {
	for _, d := range strings.Split(csp, ";") {
		if d = strings.TrimSpace(d); strings.HasPrefix(d, "img-src") {
			return d
		}
	}
	return ""
}

// TestReaderPagesAllowExactlyTheLogo: every reader page (the form, its
// error, confirm, preferences, unsubscribe, a message) allows images
// from the logo's https origin and from nowhere else; with no logo, or a
// logo that is not https, no image source at all.
func TestReaderPagesAllowExactlyTheLogo(t *testing.T) {
	pages := func(t *testing.T, e *env) map[string]func() *http.Response {
		if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"ann@example.com"}`); resp.StatusCode != http.StatusAccepted {
			t.Fatal(resp.StatusCode)
		}
		get := func(path string) func() *http.Response {
			return func() *http.Response { resp, _ := e.get(t, path); return resp }
		}
		return map[string]func() *http.Response{
			"form":        get("/"),
			"form error":  func() *http.Response { resp, _ := e.post(t, "/subscribe", formCT, "email=nope"); return resp },
			"confirm":     get("/confirm?token=" + url.QueryEscape(e.sign(t, token.Confirm, "ann@example.com"))),
			"preferences": get("/preferences?token=" + url.QueryEscape(e.sign(t, token.Preferences, "ann@example.com"))),
			"unsubscribe": get("/unsubscribe?token=" + url.QueryEscape(e.sign(t, token.Unsubscribe, "ann@example.com"))),
			"leave form":  get("/unsubscribe"),
			"message":     get("/confirm?token=forged"),
		}
	}
	for logo, want := range map[string]string{
		"https://CDN.example.com:8443/brand/logo.png?v=2": "img-src https://cdn.example.com:8443",
		"":                                  "",
		"http://cdn.example.com/l.png":      "",
		"https://u:p@cdn.example.com/l.png": "",
	} {
		e := newLogoEnv(t, logo)
		for name, page := range pages(t, e) {
			resp := page()
			csp := resp.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "default-src 'none'") || imgSrc(csp) != want {
				t.Errorf("logo %q, %s (%d): Content-Security-Policy %q, want the image source %q", logo, name, resp.StatusCode, csp, want)
			}
		}
	}
}

// TestFormPageLogoLoadsInChromium: the subscribe form, opened in a real
// browser, shows the logo served from another https origin (a local TLS
// server; the browser is told to accept its test certificate).
func TestFormPageLogoLoadsInChromium(t *testing.T) {
	var logo bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	if err := png.Encode(&logo, img); err != nil {
		t.Fatal(err)
	}
	cdn := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(logo.Bytes())
	}))
	t.Cleanup(cdn.Close)
	e := newLogoEnv(t, cdn.URL+"/logo.png")
	ctx := headless.New(t, 420, 900, chromedp.Flag("ignore-certificate-errors", true))
	if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("img.nl-logo"))); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		w, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(() => { const i = document.querySelector("img.nl-logo"); return i.complete ? i.naturalWidth : -1 })()`))
		if err != nil || w != 4 {
			return fmt.Errorf("the logo's width in the page is %d (%v), want 4: not loaded", w, err)
		}
		return nil
	})
}
