package mailer

import (
	"strings"
	"testing"
)

// Markdown with raw HTML, scripts and javascript:/data: links never
// reaches a mail as active content; the text part has no markup left.
func TestRenderMarkdownSafeAndReadable(t *testing.T) {
	src := "# Hello *there*\n\nRead [our post](https://example.com/post) and <https://example.com/auto>.\n\n" +
		"<script>alert(1)</script>\n\nInline <b onclick=\"x()\">bold</b> text.\n\n" +
		"[click](javascript:alert(1)) and [data](data:text/html;base64,PHNjcmlwdD4=) ![pic](javascript:x)\n\n" +
		"* one **strong**\n* two `code`\n\n1. first\n2. second\n\n> quoted\n"
	b, err := RenderMarkdown(src)
	if err != nil {
		t.Fatal(err)
	}
	h := string(b.HTML)
	for _, bad := range []string{"<script", "javascript:", "data:text", "<b onclick", "onclick=\""} {
		if strings.Contains(h, bad) {
			t.Errorf("HTML holds %q:\n%s", bad, h)
		}
	}
	for _, want := range []string{"<h1>Hello <em>there</em></h1>", `<a href="https://example.com/post">our post</a>`,
		"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;b onclick=&quot;x()&quot;&gt;bold", "<li>one <strong>strong</strong></li>"} {
		if !strings.Contains(h, want) {
			t.Errorf("HTML lacks %q:\n%s", want, h)
		}
	}
	txt := b.Text
	for _, want := range []string{"Hello there\n===========", "Read our post [1] and https://example.com/auto.",
		"* one strong", "* two code", "1. first", "2. second", "> quoted", "[1] https://example.com/post", "click and data"} {
		if !strings.Contains(txt, want) {
			t.Errorf("text lacks %q:\n%s", want, txt)
		}
	}
	for _, bad := range []string{"**", "](", "javascript:", "data:text", "# Hello", "`"} {
		if strings.Contains(txt, bad) {
			t.Errorf("text holds markup %q:\n%s", bad, txt)
		}
	}
}

// The issue kind renders the preheader hidden, the body once, and the
// usual footer.
func TestIssueTemplate(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RenderMarkdown("Hi **all**")
	m, err := r.Render(KindIssue, Data{Email: "a@b.co", PreferencesURL: "https://x/p", UnsubscribeURL: "https://x/u",
		Subject: "News & more", Preheader: "A look ahead", IssueHTML: b.HTML, IssueText: b.Text})
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "News & more" || !strings.Contains(m.HTML, `aria-hidden="true">A look ahead</div>`) ||
		!strings.Contains(m.HTML, "<strong>all</strong>") || !strings.Contains(m.Text, "Hi all\n") ||
		!strings.Contains(m.Text, "https://x/p") || !strings.Contains(m.HTML, "<title>News &amp; more</title>") {
		t.Fatalf("issue mail:\n%s\n%s\n%s", m.Subject, m.Text, m.HTML)
	}
}

// TestTextPartUnescapes: the text part shows what the HTML shows, not the
// Markdown's escapes and entities; inside code, a backslash is itself.
func TestTextPartUnescapes(t *testing.T) {
	b, err := RenderMarkdown("Release 2\\.0 \\*soon\\* &amp; `a\\*b` &#65;\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Release 2.0 *soon* & a\\*b A"; !strings.Contains(b.Text, want) {
		t.Fatalf("text part %q, want %q in it", b.Text, want)
	}
}
