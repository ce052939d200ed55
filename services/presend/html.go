package presend

import (
	"strings"

	"golang.org/x/net/html"
)

// doc is what the checks read of an HTML part: its links, its images and
// how much text a reader sees.
type doc struct {
	links  []link
	images []image
	// text is the visible text (not in head, style or script), its
	// white space collapsed.
	text string
}

type link struct{ href, text string }

type image struct {
	src    string
	hasAlt bool
}

// maxParsed bounds what parseHTML reads: an issue's HTML is under
// MaxBody's rendering, far under this; a larger one is judged by its
// start.
const maxParsed = 4 << 20

// parseHTML reads s leniently, as a mail client would: html.Parse
// accepts any input and never fails on a string.
func parseHTML(s string) *doc {
	if len(s) > maxParsed {
		s = s[:maxParsed]
	}
	d := &doc{}
	root, err := html.Parse(strings.NewReader(s))
	if err != nil {
		return d
	}
	var text strings.Builder
	d.walk(root, &text)
	d.text = strings.Join(strings.Fields(text.String()), " ")
	return d
}

func (d *doc) walk(n *html.Node, text *strings.Builder) {
	switch {
	case n.Type == html.TextNode:
		text.WriteString(n.Data)
		text.WriteByte(' ')
	case n.Type == html.ElementNode && (n.Data == "head" || n.Data == "style" || n.Data == "script"):
		return
	case n.Type == html.ElementNode && n.Data == "img":
		d.addImage(n)
	case n.Type == html.ElementNode && n.Data == "a":
		if href, ok := attr(n, "href"); ok {
			var inner strings.Builder
			collectText(n, &inner)
			d.links = append(d.links, link{href: strings.TrimSpace(href), text: strings.Join(strings.Fields(inner.String()), " ")})
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		d.walk(c, text)
	}
}

// addImage notes an image; a 1×1 one is a tracking pixel, not content.
func (d *doc) addImage(n *html.Node) {
	w, _ := attr(n, "width")
	h, _ := attr(n, "height")
	if w == "1" && h == "1" {
		return
	}
	src, _ := attr(n, "src")
	alt, _ := attr(n, "alt")
	// Markdown writes alt="" for ![](src): an empty alt is no text.
	d.images = append(d.images, image{src: src, hasAlt: strings.TrimSpace(alt) != ""})
}

func collectText(n *html.Node, b *strings.Builder) {
	if n.Type == html.TextNode {
		b.WriteString(n.Data)
		b.WriteByte(' ')
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		collectText(c, b)
	}
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && strings.EqualFold(a.Key, key) {
			return a.Val, true
		}
	}
	return "", false
}

// hrefs are d's distinct http(s) link targets, in order.
func (d *doc) hrefs() []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range d.links {
		lower := strings.ToLower(l.href)
		if (!strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://")) || seen[l.href] {
			continue
		}
		seen[l.href] = true
		out = append(out, l.href)
	}
	return out
}
