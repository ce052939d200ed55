package engage

import (
	"html"
	"net/url"
	"regexp"
	"strings"
)

// The links of an issue's body are rewritten once per issue (the worker,
// before the mail is prepared for its readers): each http(s) link of the
// HTML becomes the counted redirect, numbered by its first appearance,
// and the same target in the text part gets the same number. The
// reader's part of the token is left as a mark the mailer fills in per
// reader. A link whose text is an address is left as written
// (showsAddress).

var (
	// hrefRe finds an <a>, its href and its text in the HTML our
	// Markdown renderer writes: double-quoted, HTML-escaped; links do
	// not nest.
	hrefRe = regexp.MustCompile(`(?s)(<a\s[^>]*?\bhref=")([^"]*)("[^>]*>)(.*?)(</a>)`)
	// tagRe finds the tags inside a link's text (<strong>, <code>).
	tagRe = regexp.MustCompile(`<[^>]*>`)
	// addressLike is a link text that reads as an address: a scheme or
	// "www.", as Markdown's autolinks write them.
	addressLike = regexp.MustCompile(`(?i)\b(?:https?://|www\.)`)
	// textURLRe finds the addresses in the text part.
	textURLRe = regexp.MustCompile(`https?://[^\s<>"\[\]]+`)
)

// Rewritten is an issue's body with its links counted.
type Rewritten struct {
	HTML, Text string
	// URLs are the targets by index: what SetIssueLinks stores.
	URLs []string
}

// Rewrite rewrites body's links. tracked is the counted URL of link
// index (BaseURL/r/LINKPART.MARK, the mark the reader's part replaces).
// Links to base (the service's own pages) are left alone.
func Rewrite(htmlBody, text, base string, tracked func(index int) string) Rewritten {
	return RewriteTo(htmlBody, text, base, func(index int, _ string) string { return tracked(index) })
}

// RewriteTo is Rewrite with the target at hand: tracked(index, target)
// is the counted URL of the link (a test send's carries its target).
func RewriteTo(htmlBody, text, base string, tracked func(index int, target string) string) Rewritten {
	index := map[string]int{}
	var urls []string
	own := func(u string) bool { return base != "" && strings.HasPrefix(u, base+"/") }
	out := Rewritten{}
	out.HTML = hrefRe.ReplaceAllStringFunc(htmlBody, func(m string) string {
		sub := hrefRe.FindStringSubmatch(m)
		target := html.UnescapeString(sub[2])
		if !countable(target) || own(target) || showsAddress(sub[4]) {
			return m
		}
		i, ok := index[target]
		if !ok {
			i = len(urls)
			index[target] = i
			urls = append(urls, target)
		}
		return sub[1] + html.EscapeString(tracked(i, target)) + sub[3] + sub[4] + sub[5]
	})
	out.Text = textURLRe.ReplaceAllStringFunc(text, func(m string) string {
		// A sentence's full stop or comma after an address is not part
		// of it.
		trimmed := strings.TrimRight(m, ".,;:!?)")
		if i, ok := index[trimmed]; ok {
			return tracked(i, trimmed) + m[len(trimmed):]
		}
		return m
	})
	out.URLs = urls
	return out
}

// showsAddress reports whether a link's text (HTML) shows an address. Such
// a link is left as written, and not counted: its counted form would
// lead to our host under a text naming another, which mail clients flag
// as a disguised link and SpamAssassin scores (HTTPS_HTTP_MISMATCH: an
// https:// text whose domain is not the href's).
func showsAddress(linkHTML string) bool {
	return addressLike.MatchString(html.UnescapeString(tagRe.ReplaceAllString(linkHTML, "")))
}

func countable(u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return false
	}
	s := strings.ToLower(p.Scheme)
	return s == "http" || s == "https"
}

// HoneypotHTML is the hidden link appended to an issue's HTML: no person
// sees or follows it (not displayed, not in the text part); a scanner
// that follows every href does.
func HoneypotHTML(href string) string {
	return `<a href="` + html.EscapeString(href) + `" style="display:none;font-size:0;color:transparent" aria-hidden="true" tabindex="-1"></a>`
}

// PixelHTML is the open pixel appended to an issue's HTML.
func PixelHTML(src string) string {
	return `<img src="` + html.EscapeString(src) + `" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0">`
}
