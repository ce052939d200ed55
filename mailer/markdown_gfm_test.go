package mailer

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// gfmExample is one example of goldmark's test data: its number and
// title, and its Markdown.
type gfmExample struct {
	name, markdown string
}

// readGFMExamples reads goldmark's example files in testdata/goldmark-gfm
// (see its README): examples separated by a line of "= = =", each a title
// line, perhaps an OPTIONS line, then the Markdown and the expected HTML
// between lines of "- - -".
func readGFMExamples(t *testing.T) []gfmExample {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "goldmark-gfm", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	var out []gfmExample
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range strings.Split(string(b), "//= = = = = = = = = = = = = = = = = = = = = = = =//") {
			parts := strings.Split(ex, "//- - - - - - - - -//\n")
			if len(parts) != 3 {
				continue // the space after the last one
			}
			title := strings.TrimSpace(parts[0])
			md := parts[1]
			if strings.Contains(title, `"enableEscape": true`) {
				md = strings.ReplaceAll(md, `\t`, "\t")
			}
			title, _, _ = strings.Cut(title, "\n")
			out = append(out, gfmExample{name: filepath.Base(f) + " " + title, markdown: md})
		}
	}
	return out
}

// shownWords are the words a reader sees in an HTML fragment: its text and
// its images' alt text.
func shownWords(t *testing.T, fragment string) []string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(fragment))
	if err != nil {
		t.Fatal(err)
	}
	var words []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			words = append(words, strings.Fields(n.Data)...)
		case html.ElementNode:
			if n.Data == "img" {
				for _, a := range n.Attr {
					if a.Key == "alt" {
						words = append(words, strings.Fields(a.Val)...)
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return words
}

// coreExamples are CommonMark's other nodes, beside the GFM examples.
var coreExamples = []string{
	"# One\n\nTwo\n---\n\n*em* **strong** `code` <b>raw</b> a\\\nhard break\n",
	"> quote **in** a\n> > nested quote\n\n1. one\n2. two\n   - inner item\n\n***\n",
	"    indented code\n\n```go\nfenced code\n```\n",
	"<pre>\nraw block\n</pre>\n\n<div>\n*not* markdown\n</div>\n",
	"[ref link][r] and ![alt text](https://e.example/i.png \"title\") and [![inner image](https://e.example/j.png)](https://e.example)\n\n[r]: https://e.example/r\n",
	"<https://e.example/auto> <mail@e.example> &copy; &#35; \\* \\_\n",
}

// TestTextPartHasEveryWordOfHTML: for each of goldmark's own GFM examples
// (tables, task lists, strikethrough, autolinks) and the CommonMark nodes,
// every word the HTML part shows is in the text part: nothing the writer
// wrote is in one part only.
func TestTextPartHasEveryWordOfHTML(t *testing.T) {
	examples := readGFMExamples(t)
	if len(examples) < 40 {
		t.Fatalf("read %d examples, want the 42 of goldmark's four files", len(examples))
	}
	for i, md := range coreExamples {
		examples = append(examples, gfmExample{name: "core " + string(rune('a'+i)), markdown: md})
	}
	for _, ex := range examples {
		b, err := RenderMarkdown(ex.markdown)
		if err != nil {
			t.Errorf("%s: %v", ex.name, err)
			continue
		}
		for _, w := range shownWords(t, string(b.HTML)) {
			if !strings.Contains(b.Text, w) {
				t.Errorf("%s: %q is in the HTML part, not in the text part\nMarkdown:\n%s\nHTML:\n%s\ntext:\n%s", ex.name, w, ex.markdown, b.HTML, b.Text)
				break
			}
		}
	}
}

// TestTextPartTablesAndTasks: a table's cells are in aligned columns
// under its header, and a task list keeps which items are done.
func TestTextPartTablesAndTasks(t *testing.T) {
	b, err := RenderMarkdown("| Item | Price | Qty |\n|:-----|------:|:---:|\n| Apple | 1.20 | 3 |\n| Melon | 12.00 | 10 |\n\n" +
		"- [x] paid\n- [ ] shipped\n\nWas ~~10~~ 8.\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "Item   Price  Qty\n" +
		"-----  -----  ---\n" +
		"Apple   1.20   3\n" +
		"Melon  12.00  10\n\n" +
		"* ☑ paid\n" +
		"* ☐ shipped\n\n" +
		"Was ~~10~~ 8.\n"
	if b.Text != want {
		t.Fatalf("text part\n%s\nwant\n%s", b.Text, want)
	}
	if regexp.MustCompile(`\|`).MatchString(b.Text) {
		t.Fatalf("the text part holds table markup:\n%s", b.Text)
	}
}

// TestTextPartHasEveryWordOfCommonMarkSpec is the same check over the
// CommonMark spec's 652 examples, which goldmark's module ships
// (_test/spec.json): read where the go command keeps the module, and
// skipped where it cannot say (a vendored build).
func TestTextPartHasEveryWordOfCommonMarkSpec(t *testing.T) {
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/yuin/goldmark").Output()
	if err != nil || len(strings.TrimSpace(string(dir))) == 0 {
		t.Skipf("goldmark's module directory is unknown: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "_test", "spec.json"))
	if err != nil {
		t.Skipf("goldmark's module has no spec examples: %v", err)
	}
	var examples []struct {
		Markdown string
		Example  int
	}
	if err := json.Unmarshal(b, &examples); err != nil {
		t.Fatal(err)
	}
	if len(examples) < 600 {
		t.Fatalf("read %d examples", len(examples))
	}
	for _, ex := range examples {
		r, err := RenderMarkdown(ex.Markdown)
		if err != nil {
			t.Errorf("example %d: %v", ex.Example, err)
			continue
		}
		for _, w := range shownWords(t, string(r.HTML)) {
			if !strings.Contains(r.Text, w) {
				t.Errorf("example %d: %q is in the HTML part, not in the text part\nMarkdown:\n%s\nHTML:\n%s\ntext:\n%s", ex.Example, w, ex.Markdown, r.HTML, r.Text)
				break
			}
		}
	}
}
