package mailer

import (
	"strings"
	"testing"
)

// TestMarkdownForMailClients: a task list's boxes are characters (Gmail
// drops <input>), images and tables carry their sizing inline (clients
// drop <style>), a table's cells break long words.
func TestMarkdownForMailClients(t *testing.T) {
	b, err := RenderMarkdown("- [x] done\n- [ ] open\n\n![A chart](https://example.com/a.png)\n\n| a | b |\n|:-|-:|\n| 1 | 2 |\n")
	if err != nil {
		t.Fatal(err)
	}
	h := string(b.HTML)
	for _, want := range []string{"<li>☑ done</li>", "<li>☐ open</li>",
		`<img src="https://example.com/a.png" alt="A chart" style="max-width:100%;height:auto;border:0">`,
		`<table style="width:100%;max-width:100%;table-layout:fixed;`, `width="100%"`,
		`<th style="padding:4px 6px;border:1px solid #ddd;vertical-align:top;word-break:break-word;overflow-wrap:anywhere;text-align:left">a</th>`,
		`;text-align:right">2</td>`} {
		if !strings.Contains(h, want) {
			t.Errorf("the HTML lacks %s:\n%s", want, h)
		}
	}
	if strings.Contains(h, "<input") {
		t.Errorf("a task list still has form fields:\n%s", h)
	}
	if !strings.Contains(b.Text, "☑ done") || !strings.Contains(b.Text, "☐ open") {
		t.Errorf("the text part's task list:\n%s", b.Text)
	}
}
