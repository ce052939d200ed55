package presend

import (
	"context"
	"strings"
	"testing"
)

// TestSize: ok under WarnBytes, a warning over it, an error over the
// clip, each with its size.
func TestSize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n     int
		level string
	}{{WarnBytes, OK}, {WarnBytes + 1, Warning}, {ClipBytes, Warning}, {ClipBytes + 1, Error}} {
		r := Size(c.n)
		if r.Check != "size" || r.Level != c.level || !strings.Contains(r.Message, KB(c.n)) {
			t.Errorf("%d bytes: %+v, want %s", c.n, r, c.level)
		}
		if c.level != OK && r.Fix == "" {
			t.Errorf("%d bytes: no fix", c.n)
		}
	}
}

// TestImagesAlt: an image with alt text passes; one without, or with
// Markdown's empty alt, is a warning naming it; a 1×1 pixel is no image.
func TestImagesAlt(t *testing.T) {
	t.Parallel()
	ok := ImagesAlt(parseHTML(`<p><img src="a.png" alt="A chart"><img src="p.gif" width="1" height="1"></p>`))
	if ok.Level != OK {
		t.Errorf("alt text given: %+v", ok)
	}
	bad := ImagesAlt(parseHTML(`<img src="a.png" alt="A chart"><img src="https://x.example/b.png" alt=""><img src="c.png">`))
	if bad.Level != Warning || !strings.Contains(bad.Message, "2 image(s)") || !strings.Contains(bad.Message, "b.png") ||
		!strings.Contains(bad.Message, "c.png") || !strings.Contains(bad.Fix, "![") {
		t.Errorf("images without alt text: %+v", bad)
	}
}

// TestPostal: no postal address (or blanks) is a warning with where to
// set one; one set passes.
func TestPostal(t *testing.T) {
	t.Parallel()
	if r := Postal("  \n"); r.Level != Warning || !strings.Contains(r.Fix, "/admin/settings") {
		t.Errorf("no address: %+v", r)
	}
	if r := Postal("1 Main St, Springfield"); r.Level != OK {
		t.Errorf("an address: %+v", r)
	}
}

// TestSpamRules: a plain mail scores 0; each rule fires on its case,
// adding its score to the total, with its fix.
func TestSpamRules(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("Words a reader reads. ", 30)
	plain := parseHTML(`<p>` + long + `<a href="https://news.example/a">https://news.example/a</a> <a href="https://b.example">read more</a></p>`)
	if r := Spam("March news", "text", plain, plain); r.Level != OK || !strings.Contains(r.Message, "score 0") {
		t.Fatalf("a plain mail: %+v", r)
	}
	cases := map[string]struct {
		subject, text string
		body          string
	}{
		"MIME_HTML_ONLY":    {"March news", "", `<p>` + long + `</p>`},
		"HTML_IMAGE_ONLY":   {"March news", "text", `<p><img src="a.png" alt="sale"> Buy</p>`},
		"URI_TEXT_MISMATCH": {"March news", "text", `<p>` + long + `<a href="https://evil.example/x">https://bank.example/login</a></p>`},
		"SUBJ_ALL_CAPS":     {"HUGE SALE NOW", "text", `<p>` + long + `</p>`},
	}
	for rule, c := range cases {
		d := parseHTML(c.body)
		r := Spam(c.subject, c.text, d, d)
		if r.Level != Warning || !strings.Contains(r.Message, rule) || r.Fix == "" {
			t.Errorf("%s: %+v", rule, r)
		}
		for other := range cases {
			if other != rule && strings.Contains(r.Message, other) {
				t.Errorf("%s: %s fired too: %s", rule, other, r.Message)
			}
		}
	}
	all := parseHTML(`<a href="https://evil.example">www.bank.example</a><img src="a.png">`)
	if r := Spam("FREE", "", all, all); !strings.Contains(r.Message, "score 4.0") {
		t.Errorf("every rule: %+v", r)
	}
}

// TestShownHost: only an address as a link's text shows a host; a
// subdomain of the target is the same site.
func TestShownHost(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]string{"https://A.example/x": "a.example", "www.b.example": "www.b.example", "read more": "", "b.example": ""} {
		if got := shownHost(text); got != want {
			t.Errorf("shownHost(%q) = %q, want %q", text, got, want)
		}
	}
	if !sameSite("www.news.example", "news.example") || !sameSite("a.news.example", "news.example") || sameSite("news.example", "evil.example") {
		t.Error("sameSite")
	}
}

// TestRunOrder: Run gives one line per check in order, links skipped
// without a link checker and the postal address when asked.
func TestRunOrder(t *testing.T) {
	t.Parallel()
	html := `<p>Hello</p>`
	rs := (&Checker{}).Run(context.Background(), Mail{Subject: "Hi", HTML: html, Text: "Hello", PostalAddress: "1 Main St"})
	var names []string
	for _, r := range rs {
		names = append(names, r.Check)
	}
	if strings.Join(names, ",") != "size,images_alt,postal_address,spam" {
		t.Fatalf("checks: %v", names)
	}
	if rs[0].Message != Size(len(html)).Message {
		t.Errorf("size measured the HTML when HTMLBytes is 0: %+v", rs[0])
	}
	rs = (&Checker{}).Run(context.Background(), Mail{Subject: "Hi", HTML: html, Text: "Hello", SkipPostal: true})
	if len(rs) != 3 || len(Errors(rs)) != 0 {
		t.Fatalf("SkipPostal: %+v", rs)
	}
}
