// Package mdlimit bounds the work of rendering a Markdown body before
// any parser sees it: the checks of an issue (the API, the console, the
// commands) and the mailer's renderer share it, so a body the API accepts
// is one the worker renders in linear time.
package mdlimit

import (
	"errors"
	"fmt"
	"strings"
)

// goldmark's parser is quadratic, or worse, on some shapes of input: 200
// KB of "[a](" cost 7.7 s of CPU (each "](" opens a link destination that
// is scanned to the end of the paragraph; each "]" walks the open link
// labels), and so do runs of unclosed "[" or "![", emphasis delimiters
// ("*a *a *a …"), lists or quotes nested thousands deep on one line
// ("- - - - …", ">>>> …"), and a table whose header has thousands of
// columns (every row gets as many cells). Check bounds each with a
// linear scan of the source, before goldmark sees it: a body within the
// bounds renders in time linear in its size, one outside is refused.

// Limits of Check.
const (
	// MaxNesting is the deepest a line may nest block containers:
	// its '>' and list markers, and a list item's indentation (a nested
	// item is at least two columns further in).
	MaxNesting = 32
	// MaxTableCells is the most table cells a body may have in
	// all: the rows of each table times the columns of its header.
	MaxTableCells = 20_000
	// MaxDelimiterWork bounds, summed over the inline runs (a
	// paragraph, a list item, a heading), the run's delimiters ('[', ']',
	// '*', '_', '~', '`') times its length: what the link and emphasis
	// parsers may spend on it at worst. A 100 KB list of 1,000 linked
	// items is well below (each item is a run of its own); a single
	// paragraph of 100 KB with 500 links in it is at the bound.
	MaxDelimiterWork = 100_000_000
)

// ErrTooComplex is wrapped by every error Check returns
// (an *Error).
var ErrTooComplex = errors.New("the Markdown is too complex to render")

// Error says which bound a body exceeds, and where.
type Error struct {
	Line   int    // 1-based line where the bound was passed
	Reason string // what to change, for the writer
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v: line %d: %s", ErrTooComplex, e.Line, e.Reason)
}

func (e *Error) Unwrap() error { return ErrTooComplex }

// Check reports whether src is within the bounds that keep its
// rendering linear (MaxNesting, MaxTableCells,
// MaxDelimiterWork); the error is an *Error. It reads src
// once, in time linear in its length. The mailer's RenderMarkdown
// refuses what it refuses.
func Check(src string) error {
	_, _, err := Measure(src)
	return err
}

// Measure is Check's count: src's delimiter work and table cells (as far
// as it read), to show how far a body is from the bounds.
func Measure(src string) (work int64, cells int, err error) {
	c := markdownCost{}
	err = c.scan(src)
	return c.work, c.cells, err
}

// markdownCost is Check's scan: the work counted so far.
type markdownCost struct {
	cells int   // table cells so far
	work  int64 // delimiter work of the finished inline runs

	// The inline run being read: its first line, delimiters and length.
	runStart          int
	runDelims, runLen int64
	// The table being read: its columns (0: none), and the header row's
	// line, to tell a delimiter row from a setext underline.
	tableCols int
	prevLine  string
	// An open fenced code block: its fence ("```", "~~~~"…), else "".
	fence string
}

func (c *markdownCost) scan(src string) error {
	n := 0
	for src != "" {
		var line string
		line, src, _ = strings.Cut(src, "\n")
		n++
		line = strings.TrimSuffix(line, "\r")
		if err := c.line(n, line); err != nil {
			return err
		}
	}
	return c.endRun()
}

func (c *markdownCost) line(n int, line string) error {
	depth, item, rest := containers(line)
	if depth > MaxNesting {
		return &Error{Line: n, Reason: fmt.Sprintf("lists or quotes nested more than %d deep", MaxNesting)}
	}
	body := strings.TrimLeft(rest, " \t")
	if c.fence != "" {
		// Code: no inline parsing, no table.
		if strings.HasPrefix(body, c.fence) && strings.Trim(body, c.fence[:1]+" \t") == "" {
			c.fence = ""
		}
		return nil
	}
	if f := fenceOpening(body); f != "" {
		c.fence = f
		c.tableCols = 0
		return c.endRun()
	}
	blank := strings.TrimSpace(body) == ""
	if blank || item || atxHeading(body) {
		// The paragraph before ends here: a blank line, a new list item
		// or a heading always ends it. Anything else may continue it
		// (a lazy line, a quote's next line), and is counted with it.
		if err := c.endRun(); err != nil {
			return err
		}
	}
	if blank {
		c.tableCols = 0
	} else if c.tableCols > 0 {
		c.cells += c.tableCols
	} else if cols := delimiterRow(body); cols > 0 && strings.Contains(c.prevLine, "|") {
		c.tableCols = cols
		c.cells += 2 * cols // the header and this row
	}
	if c.cells > MaxTableCells {
		return &Error{Line: n, Reason: fmt.Sprintf("tables with more than %d cells in all (rows times columns)", MaxTableCells)}
	}
	c.prevLine = body
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '[', ']', '*', '_', '~', '`':
			c.runDelims++
		}
	}
	if c.runLen == 0 {
		c.runStart = n
	}
	c.runLen += int64(len(line)) + 1
	return nil
}

// endRun adds the inline run that just ended to the work.
func (c *markdownCost) endRun() error {
	c.work += c.runDelims * c.runLen
	c.runDelims, c.runLen = 0, 0
	if c.work > MaxDelimiterWork {
		return &Error{Line: c.runStart, Reason: "too many brackets or emphasis marks in one paragraph (unclosed links, nested brackets); " +
			"split it with blank lines, or escape them with a backslash"}
	}
	return nil
}

// containers reads the block containers a line opens or continues: its
// '>' and list markers. depth counts them, and a level for every two
// columns of indentation before a list marker (a nested item is at least
// two columns further in). item says the line starts a list item for
// sure (a bullet, or "1." or "1)", less than four columns in): a new
// paragraph. rest is what follows the markers.
func containers(line string) (depth int, item bool, rest string) {
	rest = line
	indent, marker := 0, false
	for {
		col, i := 0, 0
		for ; i < len(rest) && (rest[i] == ' ' || rest[i] == '\t'); i++ {
			if rest[i] == '\t' {
				col += 4 - col%4
			} else {
				col++
			}
		}
		r := rest[i:]
		if strings.HasPrefix(r, ">") {
			depth++
			rest = r[1:]
			continue
		}
		k, first := listMarker(r)
		if k == 0 {
			if marker {
				depth += indent / 2
			}
			return depth, item, rest
		}
		if !marker && col < 4 && first {
			item = true
		}
		depth++
		indent += col
		marker = true
		rest = r[k:]
	}
}

// listMarker is the length of a list marker at the start of s ("- ",
// "* ", "+ ", "12. ", "3) ", or one alone at the end of the line), or 0;
// first says it can start a list that interrupts a paragraph (a bullet,
// or an ordered one numbered 1).
func listMarker(s string) (n int, first bool) {
	if s == "" {
		return 0, false
	}
	if strings.IndexByte("-*+", s[0]) >= 0 {
		switch {
		case len(s) == 1:
			return 1, false // an empty item: it interrupts no paragraph
		case s[1] == ' ' || s[1] == '\t':
			return 2, true
		}
		return 0, false
	}
	i := 0
	for i < len(s) && i < 9 && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i >= len(s) || s[i] != '.' && s[i] != ')' {
		return 0, false
	}
	if i+1 == len(s) {
		return i + 1, false
	}
	if s[i+1] != ' ' && s[i+1] != '\t' {
		return 0, false
	}
	return i + 2, s[:i] == "1"
}

// atxHeading reports whether s is an ATX heading ("## Title").
func atxHeading(s string) bool {
	n := len(s) - len(strings.TrimLeft(s, "#"))
	return n >= 1 && n <= 6 && (n == len(s) || s[n] == ' ' || s[n] == '\t')
}

// fenceOpening is the fence a line opens a fenced code block with (three
// or more '`' or '~'), or "".
func fenceOpening(s string) string {
	if !strings.HasPrefix(s, "```") && !strings.HasPrefix(s, "~~~") {
		return ""
	}
	n := len(s) - len(strings.TrimLeft(s, s[:1]))
	if s[0] == '`' && strings.Contains(s[n:], "`") {
		return "" // an info string with a backtick: inline code, not a fence
	}
	return s[:n]
}

// delimiterRow is the number of columns of a GFM table's delimiter row
// ("| :-- | --: |"), or 0 when s is not one.
func delimiterRow(s string) int {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "|") || strings.Trim(s, "|:- \t") != "" || !strings.Contains(s, "-") {
		return 0
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "|"), "|")
	return strings.Count(s, "|") + 1
}
