package mailer

import (
	"strings"
	"testing"
)

// TestMarkdownIPv6LinkKeepsItsBrackets: a link or image to an IPv6
// literal host keeps the brackets RFC 3986 gives it (goldmark's escaping
// wrote them %5B…%5D, a link nobody could open: the probe's finding);
// brackets elsewhere in a URL stay escaped.
func TestMarkdownIPv6LinkKeepsItsBrackets(t *testing.T) {
	b, err := RenderMarkdown("[x](http://[::1]:7402/v6) <https://[2001:db8::1]/a> ![i](https://[2001:db8::2]/p.png) [y](https://example.com/a[1])")
	if err != nil {
		t.Fatal(err)
	}
	html := string(b.HTML)
	for _, want := range []string{`href="http://[::1]:7402/v6"`, `href="https://[2001:db8::1]/a"`, `src="https://[2001:db8::2]/p.png"`, `href="https://example.com/a%5B1%5D"`} {
		if !strings.Contains(html, want) {
			t.Errorf("want %s in %s", want, html)
		}
	}
}
