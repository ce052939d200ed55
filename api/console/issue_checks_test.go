package console_test

import (
	"net/url"
	"strings"
	"testing"
)

// TestConsoleShowsPreSendChecks: the issue page's preview lists the
// pre-send checks, each with its level and fix (an image without alt
// text, no postal address); the preview page lists them too, frames the
// mail at 320 px when asked, and applies the mail's dark-mode styles
// with dark=1 (and only then).
func TestConsoleShowsPreSendChecks(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(t, editorToken)
	body := `<style>@media (prefers-color-scheme: dark){p{color:#eee}}</style><img src="chart.png"> Short`
	p := b.post("/admin/issues", url.Values{"subject": {"Charts"}, "body": {body}, "topics": {"digest"}})
	m := issueIDRe.FindStringSubmatch(p.location)
	if p.code != 303 || m == nil {
		t.Fatalf("create: %d %q", p.code, p.location)
	}
	path := "/admin/issues/" + m[1]
	mustContain(t, "issue page", b.get(path), `data-checks`, `data-check="size" data-level="ok"`,
		`data-check="images_alt" data-level="warning"`, "chart.png", `data-check="postal_address" data-level="warning"`,
		`data-check="spam" data-level="warning"`, "HTML_IMAGE_ONLY", "Fix: ", "preview?as=narrow", "dark=1")
	if page := b.get(path).body; strings.Contains(page, `name="ignore_checks"`) {
		t.Error("the send step offers to ignore checks that found no error")
	}

	narrow := b.get(path + "/preview?as=narrow").body
	mustContainText(t, "narrow preview", narrow, `data-preview="narrow"`, "width:320px", `data-check="images_alt"`)
	if strings.Contains(narrow, "min-width:0") {
		t.Error("the light preview applies the dark-mode styles")
	}
	dark := b.get(path + "/preview?as=narrow&dark=1").body
	mustContainText(t, "dark preview", dark, `data-field="dark"`, "(min-width:0)", `data-scheme="light"`)
	if strings.Contains(dark, "prefers-color-scheme: dark") {
		t.Error("the dark preview kept the dark-mode query")
	}
}

func mustContainText(t *testing.T, what, page string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(page, p) {
			t.Errorf("%s: no %q in:\n%s", what, p, page)
		}
	}
}
