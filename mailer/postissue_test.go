package mailer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPostIssueContent: a feed entry's issue has the entry's title as its
// subject and its summary and link as its body; whatever the feed's
// author wrote stays text (no markup, no HTML, no javascript: link).
func TestPostIssueContent(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	subject, md, err := r.PostIssue(Entry{
		Title:   "Release *2.0*\n <script>alert(1)</script>",
		URL:     "https://blog.example/2.0?a=1&b=<2>",
		Summary: "It is out. [click](javascript:alert(1)) <img src=x onerror=alert(1)>",
	})
	if err != nil || subject != "Release *2.0* <script>alert(1)</script>" {
		t.Fatalf("subject %q %v", subject, err)
	}
	body, err := RenderMarkdown(md)
	if err != nil {
		t.Fatal(err)
	}
	html := string(body.HTML)
	for _, want := range []string{
		`It is out. [click](javascript:alert(1)) &lt;img src=x onerror=alert(1)&gt;`,
		`<a href="https://blog.example/2.0?a=1&amp;b=%3C2%3E">Read “Release *2.0* &lt;script&gt;alert(1)&lt;/script&gt;”</a>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %s:\n%s", want, html)
		}
	}
	if strings.Contains(html, "<script") || strings.Contains(html, "<img") || strings.Contains(html, `href="javascript`) {
		t.Fatalf("active content in the post:\n%s", html)
	}
	if !strings.Contains(body.Text, "https://blog.example/2.0?a=1&b=%3C2%3E") {
		t.Errorf("the text part lacks the link:\n%s", body.Text)
	}

	// No title: the link is the subject. A long title is cut, marked.
	if subject, _, _ := r.PostIssue(Entry{URL: "https://blog.example/x"}); subject != "https://blog.example/x" {
		t.Errorf("untitled subject %q", subject)
	}
	subject, _, _ = r.PostIssue(Entry{Title: strings.Repeat("é", 300), URL: "https://blog.example/x"})
	if utf8.RuneCountInString(subject) != MaxSubject || !strings.HasSuffix(subject, "…") {
		t.Errorf("long subject: %d characters %q", utf8.RuneCountInString(subject), subject)
	}
}

// TestPostIssueTemplate: a publisher's post.md replaces the built-in one;
// one that does not parse stops NewRenderer, naming the file.
func TestPostIssueTemplate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, PostBodyTemplate), []byte("New on the blog: [{{md .Title}}]({{mdurl .URL}})\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := NewRenderer(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, md, err := r.PostIssue(Entry{Title: "A_b", URL: "https://blog.example/a"}); err != nil || md != "New on the blog: [A\\_b](<https://blog.example/a>)\n" {
		t.Fatalf("body %q %v", md, err)
	}
	if err := os.WriteFile(filepath.Join(dir, PostBodyTemplate), []byte("{{if}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRenderer(dir); err == nil || !strings.Contains(err.Error(), PostBodyTemplate) {
		t.Fatalf("a broken post.md: %v", err)
	}
}
