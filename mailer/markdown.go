package mailer

import (
	"bytes"
	"fmt"
	htmltemplate "html/template"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/newsletter/newsletter/internal/mdlimit"
)

// An issue is written in Markdown (CommonMark with GitHub's tables,
// strikethrough and autolinks). It becomes the HTML part and the text
// part of its mail once per issue, not per reader: the result goes into
// the shared Data (IssueHTML, IssueText) that Prepare fills in.
//
// Nothing a writer types can reach a reader as active content: raw HTML
// is shown as text (escaped, never passed through: no html.WithUnsafe),
// and a link or image whose address is not http, https, mailto or
// relative (javascript:, data:, vbscript:, file:…) loses its address.

// Body is an issue's body, rendered.
type Body struct {
	HTML htmltemplate.HTML
	Text string
}

var markdown = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(safeLinks{}, 100), util.Prioritized(mailSizing{}, 200))),
	goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(escapedHTML{}, 100), util.Prioritized(taskBoxes{}, 100))),
)

// RenderMarkdown renders src as an issue's HTML and text. A body
// mdlimit.Check refuses is refused (its *mdlimit.Error), unrendered.
func RenderMarkdown(src string) (Body, error) {
	if err := mdlimit.Check(src); err != nil {
		return Body{}, err
	}
	source := []byte(src)
	doc := markdown.Parser().Parse(text.NewReader(source))
	var h bytes.Buffer
	if err := markdown.Renderer().Render(&h, source, doc); err != nil {
		return Body{}, fmt.Errorf("render markdown: %w", err)
	}
	tr := newTextRenderer(source)
	tr.block(doc, "")
	html := ipv6Host.ReplaceAllString(h.String(), `$1="$2[$3]`)
	return Body{HTML: htmltemplate.HTML(html), Text: tr.String()}, nil //nolint:gosec // goldmark's safe output: raw HTML escaped, links filtered
}

// ipv6Host finds an IPv6 literal host that goldmark's URL escaping wrote
// as %5B…%5D in an href or src: RFC 3986 keeps its brackets as they are,
// and escaped they make a link no browser or mail client opens.
var ipv6Host = regexp.MustCompile(`(href|src)="([a-zA-Z][a-zA-Z0-9+.-]*://)%5B([0-9A-Fa-f:.]+)%5D`)

// SafeURL accepts http, https and mailto addresses and relative ones.
func SafeURL(dest string) bool {
	u, err := url.Parse(strings.TrimSpace(dest))
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "", "http", "https", "mailto":
		return !strings.ContainsAny(dest, "\r\n")
	}
	return false
}

// safeLinks unlinks links and drops images whose address is not SafeURL.
type safeLinks struct{}

func (safeLinks) Transform(doc *ast.Document, reader text.Reader, _ parser.Context) {
	var bad []ast.Node
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			if !SafeURL(string(n.Destination)) {
				bad = append(bad, n)
			}
		case *ast.Image:
			if !SafeURL(string(n.Destination)) {
				bad = append(bad, n)
			}
		case *ast.AutoLink:
			if !SafeURL(string(n.URL(reader.Source()))) {
				bad = append(bad, n)
			}
		}
		return ast.WalkContinue, nil
	})
	for _, n := range bad {
		parent := n.Parent()
		if _, link := n.(*ast.Link); link {
			for c := n.FirstChild(); c != nil; {
				next := c.NextSibling()
				parent.InsertBefore(parent, n, c)
				c = next
			}
		}
		parent.RemoveChild(parent, n)
	}
}

// escapedHTML renders raw HTML, inline or as a block, as escaped text.
type escapedHTML struct{}

func (escapedHTML) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindRawHTML, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			segs := n.(*ast.RawHTML).Segments
			for i := 0; i < segs.Len(); i++ {
				s := segs.At(i)
				_, _ = w.Write(util.EscapeHTML(s.Value(src)))
			}
		}
		return ast.WalkSkipChildren, nil
	})
	reg.Register(ast.KindHTMLBlock, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		b := n.(*ast.HTMLBlock)
		_, _ = w.WriteString("<p>")
		for i := 0; i < b.Lines().Len(); i++ {
			l := b.Lines().At(i)
			_, _ = w.Write(util.EscapeHTML(l.Value(src)))
		}
		if b.HasClosure() {
			_, _ = w.Write(util.EscapeHTML(b.ClosureLine.Value(src)))
		}
		_, _ = w.WriteString("</p>\n")
		return ast.WalkSkipChildren, nil
	})
}

var _ = html.IsDangerousURL // the renderer's own check stays on (no WithUnsafe)

// textRenderer writes the plain-text part: paragraphs and list items as
// text, links and images as numbered footnotes ("text [1]" … "[1]
// https://…"), tables as rows aligned in columns, task list items with
// the HTML's ☑ or ☐, struck text between "~~", no other Markdown markup left.
// Every node goldmark's GFM makes has a case here (markdown_test.go checks
// every word of the HTML part is in the text part).
type textRenderer struct {
	src   []byte
	out   strings.Builder
	notes *notes // shared with the renderers of list items
}

// notes are the link footnotes: their URLs in order, and each URL's
// number, so that a body with thousands of links numbers them in linear
// time.
type notes struct {
	urls []string
	num  map[string]int
}

func newTextRenderer(src []byte) *textRenderer {
	return &textRenderer{src: src, notes: &notes{num: map[string]int{}}}
}

func (t *textRenderer) String() string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(t.out.String(), "\n"))
	b.WriteString("\n")
	if len(t.notes.urls) > 0 {
		b.WriteString("\n")
		for i, u := range t.notes.urls {
			fmt.Fprintf(&b, "[%d] %s\n", i+1, u)
		}
	}
	return b.String()
}

func (t *textRenderer) note(u string) int {
	if n, ok := t.notes.num[u]; ok {
		return n
	}
	t.notes.urls = append(t.notes.urls, u)
	t.notes.num[u] = len(t.notes.urls)
	return len(t.notes.urls)
}

// block writes n's block children, each line prefixed with indent.
func (t *textRenderer) block(n ast.Node, indent string) {
	num := 0
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Heading:
			line := strings.TrimSpace(t.inline(c))
			t.out.WriteString(indent + line + "\n")
			t.out.WriteString(indent + strings.Repeat(map[bool]string{true: "=", false: "-"}[c.Level == 1], len([]rune(line))) + "\n\n")
		case *ast.Paragraph, *ast.TextBlock:
			for _, l := range strings.Split(strings.TrimSpace(t.inline(c)), "\n") {
				t.out.WriteString(indent + strings.TrimSpace(l) + "\n")
			}
			if _, tight := c.(*ast.TextBlock); !tight {
				t.out.WriteString("\n")
			}
		case *ast.List:
			num = c.Start
			for it := c.FirstChild(); it != nil; it = it.NextSibling() {
				bullet := "* "
				if c.IsOrdered() {
					bullet = fmt.Sprintf("%d. ", num)
					num++
				}
				sub := textRenderer{src: t.src, notes: t.notes}
				sub.block(it, "")
				lines := strings.Split(strings.TrimRight(sub.out.String(), "\n"), "\n")
				for i, l := range lines {
					if i == 0 {
						t.out.WriteString(indent + bullet + l + "\n")
					} else if l != "" {
						t.out.WriteString(indent + strings.Repeat(" ", len(bullet)) + l + "\n")
					} else {
						t.out.WriteString("\n")
					}
				}
			}
			t.out.WriteString("\n")
		case *ast.Blockquote:
			t.block(c, indent+"> ")
		case *ast.FencedCodeBlock, *ast.CodeBlock:
			lines := c.Lines()
			for i := 0; i < lines.Len(); i++ {
				s := lines.At(i)
				t.out.WriteString(indent + "    " + strings.TrimRight(string(s.Value(t.src)), "\n") + "\n")
			}
			t.out.WriteString("\n")
		case *ast.HTMLBlock:
			lines := c.Lines()
			for i := 0; i < lines.Len(); i++ {
				s := lines.At(i)
				t.out.WriteString(indent + strings.TrimRight(string(s.Value(t.src)), "\n") + "\n")
			}
			if c.HasClosure() {
				// The line that ends the block ("</pre>"), shown in the HTML
				// part too.
				t.out.WriteString(indent + strings.TrimRight(string(c.ClosureLine.Value(t.src)), "\n") + "\n")
			}
			t.out.WriteString("\n")
		case *east.Table:
			t.table(c, indent)
		case *ast.ThematicBreak:
			t.out.WriteString(indent + "----\n\n")
		default:
			t.block(c, indent)
		}
	}
}

// inline is n's inline content as text.
func (t *textRenderer) inline(n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			b.Write(t.text(c))
			if c.HardLineBreak() || c.SoftLineBreak() {
				b.WriteString("\n")
			}
		case *ast.String:
			b.Write(c.Value)
		case *ast.CodeSpan:
			b.WriteString(t.inline(c))
		case *ast.RawHTML:
			for i := 0; i < c.Segments.Len(); i++ {
				s := c.Segments.At(i)
				b.Write(s.Value(t.src))
			}
		case *ast.AutoLink:
			b.Write(c.URL(t.src))
		case *ast.Link:
			label := t.inline(c)
			if label == string(c.Destination) {
				b.WriteString(label)
			} else {
				fmt.Fprintf(&b, "%s [%d]", label, t.note(string(c.Destination)))
			}
		case *ast.Image:
			alt := t.alt(c)
			if alt == "" {
				alt = "image"
			}
			fmt.Fprintf(&b, "%s [%d]", alt, t.note(string(c.Destination)))
		case *east.TaskCheckBox:
			// The HTML's checkbox, with the space goldmark writes after it.
			if c.IsChecked {
				b.WriteString(taskDone)
			} else {
				b.WriteString(taskOpen)
			}
		case *east.Strikethrough:
			// Struck text shown plainly would read as current.
			b.WriteString("~~" + t.inline(c) + "~~")
		default:
			b.WriteString(t.inline(c))
		}
	}
	return b.String()
}

// text is what the HTML shows of a Text node: "\\*" is "*", "&amp;" is
// "&", "\\&amp;" is "&amp;" (an escaped "&" starts no entity), as the
// HTML renderer's Writer does; a raw one (in code) is as written.
func (t *textRenderer) text(n *ast.Text) []byte {
	v := n.Segment.Value(t.src)
	if n.IsRaw() {
		return v
	}
	resolve := func(b []byte) []byte { return util.ResolveEntityNames(util.ResolveNumericReferences(b)) }
	var out []byte
	from := 0
	for i := 0; i+1 < len(v); i++ {
		if v[i] == '\\' && util.IsPunct(v[i+1]) {
			out = append(out, resolve(v[from:i])...)
			out = append(out, v[i+1])
			i++
			from = i + 1
		}
	}
	return append(out, resolve(v[from:])...)
}

// alt is an image's description as the HTML part's alt attribute has it:
// the text within, without the markup of links or code around it.
func (t *textRenderer) alt(n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			b.Write(t.text(c))
			if c.HardLineBreak() || c.SoftLineBreak() {
				b.WriteString(" ")
			}
		case *ast.String:
			b.Write(c.Value)
		default:
			b.WriteString(t.alt(c))
		}
	}
	return b.String()
}

// table writes a GFM table as rows of cells in columns as wide as their
// widest cell (in characters), each aligned as the table says, two
// spaces apart, with a line of dashes under the header.
func (t *textRenderer) table(tb *east.Table, indent string) {
	var rows [][]string
	var widths []int
	for r := tb.FirstChild(); r != nil; r = r.NextSibling() { // the header, then the rows
		var cells []string
		for c := r.FirstChild(); c != nil; c = c.NextSibling() {
			cell := strings.Join(strings.Fields(t.inline(c)), " ")
			if i := len(cells); i == len(widths) {
				widths = append(widths, 0)
			}
			widths[len(cells)] = max(widths[len(cells)], utf8.RuneCountInString(cell))
			cells = append(cells, cell)
		}
		rows = append(rows, cells)
	}
	for i, cells := range rows {
		var line strings.Builder
		for j, cell := range cells {
			if j > 0 {
				line.WriteString("  ")
			}
			pad := widths[j] - utf8.RuneCountInString(cell)
			left := 0
			if j < len(tb.Alignments) {
				switch tb.Alignments[j] {
				case east.AlignRight:
					left = pad
				case east.AlignCenter:
					left = pad / 2
				}
			}
			line.WriteString(strings.Repeat(" ", left) + cell + strings.Repeat(" ", pad-left))
		}
		t.out.WriteString(indent + strings.TrimRight(line.String(), " ") + "\n")
		if _, header := tb.FirstChild().(*east.TableHeader); i == 0 && header {
			dashes := make([]string, len(widths))
			for j, w := range widths {
				dashes[j] = strings.Repeat("-", max(w, 1))
			}
			t.out.WriteString(indent + strings.Join(dashes, "  ") + "\n")
		}
	}
	t.out.WriteString("\n")
}
