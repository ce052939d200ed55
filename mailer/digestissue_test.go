package mailer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDigestIssueContent: the built-in subject is today's "What is new
// (<period>)"; the body lists each item as a link, its title's Markdown
// characters kept as text (never markup, never HTML), its URL usable in
// both parts.
func TestDigestIssueContent(t *testing.T) {
	r, err := NewRenderer("")
	if err != nil {
		t.Fatal(err)
	}
	entries := []Entry{
		{Title: "Release *2.0* <script>alert(1)</script>", URL: "https://example.com/a b?x=1&y=<2>", Summary: "It is out.\n\n# not a heading"},
		{Title: "[Second](javascript:alert(1))", URL: "https://example.com/2"},
	}
	subject, md, err := r.DigestIssue("2026-W49", entries)
	if err != nil || subject != "What is new (2026-W49)" {
		t.Fatalf("subject %q %v", subject, err)
	}
	body, err := RenderMarkdown(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`<a href="https://example.com/a%20b?x=1&amp;y=%3C2%3E">Release *2.0* &lt;script&gt;alert(1)&lt;/script&gt;</a>`,
		`It is out. # not a heading`,
		`<a href="https://example.com/2">[Second](javascript:alert(1))</a>`,
	} {
		if !strings.Contains(string(body.HTML), want) {
			t.Errorf("HTML lacks %s:\n%s", want, body.HTML)
		}
	}
	for _, want := range []string{"Release *2.0* <script>alert(1)</script> [1]", "[1] https://example.com/a%20b?x=1&y=%3C2%3E", "(2026-W49)"} {
		if !strings.Contains(body.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, body.Text)
		}
	}
	if strings.Contains(string(body.HTML), "<script") || strings.Contains(string(body.HTML), `href="javascript`) {
		t.Fatalf("active content in the digest:\n%s", body.HTML)
	}
}

// TestDigestIssueTemplates: a publisher's digest.txt subject and digest.md
// body replace the built-in ones; a subject that runs over the limit is
// cut, one that is empty is the built-in; a body template that does not
// parse stops NewRenderer, naming the file.
func TestDigestIssueTemplates(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	txt, err := embedded.ReadFile("templates/digest.txt")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(txt), "{{end}}")
	write("digest.txt", `{{define "subject"}}This week: {{(index .Entries 0).Title}}{{if gt (len .Entries) 1}}
		and more{{end}}{{end}}`+rest)
	write("digest.md", "{{range .Entries}}* {{md .Title}}\n{{end}}")
	r, err := NewRenderer(dir)
	if err != nil {
		t.Fatal(err)
	}
	subject, md, err := r.DigestIssue("p", []Entry{{Title: "A_b", URL: "https://x"}, {Title: "C", URL: "https://y"}})
	if err != nil || subject != "This week: A_b and more" || md != "* A\\_b\n* C\n" {
		t.Fatalf("own templates: %q %q %v", subject, md, err)
	}
	subject, _, err = r.DigestIssue("p", []Entry{{Title: strings.Repeat("é", 300), URL: "https://x"}})
	if err != nil || len([]rune(subject)) != MaxSubject {
		t.Fatalf("long subject: %d characters, %v", len([]rune(subject)), err)
	}
	write("digest.txt", `{{define "subject"}} {{end}}`+rest)
	if r, err = NewRenderer(dir); err != nil {
		t.Fatal(err)
	}
	if subject, _, err = r.DigestIssue("2026-W01", []Entry{{Title: "A", URL: "https://x"}}); err != nil || subject != "What is new (2026-W01)" {
		t.Fatalf("empty subject: %q %v", subject, err)
	}
	write("digest.md", "{{range .Entries}")
	if _, err := NewRenderer(dir); err == nil || !strings.Contains(err.Error(), "digest.md") {
		t.Fatalf("a broken digest.md: %v", err)
	}
}
