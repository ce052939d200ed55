package mailer

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/mdlimit"
)

// pathologicalBodies are bodies of about 200 KB on which goldmark's parser
// is quadratic or worse (200 KB of "[a](" cost 7.7 s of CPU).
var pathologicalBodies = map[string]string{
	"unclosed link destinations":                strings.Repeat("[a](", 50_000),
	"unclosed link openers":                     strings.Repeat("[", 200_000),
	"unclosed image openers":                    strings.Repeat("![", 100_000),
	"link destinations in a quote, a line each": strings.Repeat("> [a](x\n", 25_000),
	"emphasis delimiters":                       strings.Repeat("*a ", 70_000),
	"lists nested on one line":                  strings.Repeat("- ", 100_000) + "a",
	"quotes nested on one line":                 strings.Repeat(">", 200_000) + "a",
	"lists nested by indentation": func() string {
		var b strings.Builder
		for i := 0; b.Len() < 200_000; i++ {
			b.WriteString(strings.Repeat(" ", 2*(i%500)) + "- a\n")
		}
		return b.String()
	}(),
	"a table a thousand columns wide": "|" + strings.Repeat("a|", 1000) + "\n|" + strings.Repeat("-|", 1000) + "\n" + strings.Repeat("x\n", 100_000),
}

// TestCheckMarkdownRefusesPathologicalBodies: each is refused by
// mdlimit.Check, with a typed error an API can answer 400 with, and by
// RenderMarkdown before goldmark parses it.
func TestCheckMarkdownRefusesPathologicalBodies(t *testing.T) {
	for name, src := range pathologicalBodies {
		err := mdlimit.Check(src)
		var me *mdlimit.Error
		if !errors.Is(err, mdlimit.ErrTooComplex) || !errors.As(err, &me) || me.Line < 1 || me.Reason == "" {
			t.Errorf("%s (%d bytes): %v, want a *mdlimit.Error", name, len(src), err)
			continue
		}
		if _, err := RenderMarkdown(src); !errors.Is(err, mdlimit.ErrTooComplex) {
			t.Errorf("%s: RenderMarkdown: %v", name, err)
		}
	}
}

// ordinaryBody is size bytes of what an issue is made of: headings,
// paragraphs with links and emphasis, nested lists of links, a table,
// code with brackets in it.
func ordinaryBody(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "## Section %d\n\nSome *text* with a [link](https://example.com/%d), `code` and **bold** words, "+
			"an image ![chart](https://example.com/%d.png) and <https://example.com/auto>.\n\n", i, i, i)
		fmt.Fprintf(&b, "- [x] item [one](https://e.example/%d)\n- [ ] item two\n  - nested [x](https://e.example/n)\n    1. deeper _still_\n\n", i)
		fmt.Fprintf(&b, "> A quote with [a link](https://e.example/q) and ~~old~~ new.\n> Its second line.\n\n")
		if i%50 == 0 {
			b.WriteString("| Name | Link | Count |\n|:--|:--:|--:|\n")
			for r := range 40 {
				fmt.Fprintf(&b, "| row %d | [go](https://e.example/%d) | %d |\n", r, r, r)
			}
			b.WriteString("\n```json\n{\"a\": [[1, 2], [3, [4, [5]]]], \"b\": \"*_~`\"}\n```\n\n")
		}
	}
	return b.String()
}

// TestCheckMarkdownAcceptsOrdinaryBodies: the largest body an issue may
// have (512 KB), written as issues are, is far inside every bound: its
// counted work is under a tenth of its limit, its table cells under a
// fifth. And
// bodies at the bounds are accepted.
func TestCheckMarkdownAcceptsOrdinaryBodies(t *testing.T) {
	src := ordinaryBody(512 << 10)
	work, cells, err := mdlimit.Measure(src)
	if err != nil {
		t.Fatal(err)
	}
	if work > mdlimit.MaxDelimiterWork/10 || cells > mdlimit.MaxTableCells/5 {
		t.Fatalf("an ordinary body counts %d of %d work and %d of %d table cells", work, mdlimit.MaxDelimiterWork, cells, mdlimit.MaxTableCells)
	}
	if b, err := RenderMarkdown(src); err != nil || !strings.Contains(b.Text, "☑ item one [") {
		t.Fatalf("%v\n%.500s", err, b.Text)
	}
	for _, ok := range []string{
		strings.Repeat("> ", mdlimit.MaxNesting/2) + strings.Repeat("- ", mdlimit.MaxNesting/2) + "a",
		strings.Repeat("[a](", 3000),
		"|" + strings.Repeat("a|", 100) + "\n|" + strings.Repeat("-|", 100) + "\n" + strings.Repeat("x\n", 190),
	} {
		if err := mdlimit.Check(ok); err != nil {
			t.Errorf("%.40q…: %v", ok, err)
		}
	}
}

// BenchmarkRenderMarkdown: an ordinary 512 KB body, the costliest body
// the bounds accept (unclosed link destinations up to the work bound),
// and the check that refuses 200 KB of them.
func BenchmarkRenderMarkdown(b *testing.B) {
	worst := strings.Repeat("[a](", 3535) // the most mdlimit.Check accepts
	for name, src := range map[string]string{"ordinary 512 KB": ordinaryBody(512 << 10), "worst accepted": worst} {
		if err := mdlimit.Check(src); err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := RenderMarkdown(src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("refused 200 KB", func(b *testing.B) {
		src := pathologicalBodies["unclosed link destinations"]
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, err := RenderMarkdown(src); err == nil {
				b.Fatal("accepted")
			}
		}
	})
}
