package csvimport

import (
	"io"
	"strings"
	"testing"
)

// The reader splits lines before any CSV parsing, so a quote can never
// take the next lines with it; CountLines counts the same lines.
func TestLinesAndRecords(t *testing.T) {
	long := strings.Repeat("x", MaxLine+10)
	file := "\ufeffemail,name\r\n" + // a spreadsheet's BOM and CRLF
		"a@example.com,\"Ann\r\n" + // 2: unbalanced quote
		"b@example.com,\"Smith, B\"\n" + // 3: a quoted comma
		"\n" + // 4: blank
		long + "\n" + // 5: too long
		"c@example.com,Br\"oken\n" + // 6: a bare quote
		"d@example.com" // 7: no line break at the end
	lr := newLineReader(strings.NewReader(file))
	type got struct {
		text    string
		tooLong bool
	}
	var lines []got
	for {
		text, tooLong, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, got{string(text), tooLong})
	}
	if n, err := CountLines(strings.NewReader(file)); err != nil || n != int64(len(lines)) || n != 7 {
		t.Fatalf("CountLines %d %v, the reader read %d lines, want 7", n, err, len(lines))
	}
	if lines[1].text != `a@example.com,"Ann` || lines[3].text != "" || !lines[4].tooLong || lines[6].text != "d@example.com" {
		t.Fatalf("lines %+v", lines)
	}
	for i, want := range map[int]string{1: "unbalanced quote", 5: `bare " in non-quoted-field`} {
		if _, reason := parseLine([]byte(lines[i].text)); !strings.Contains(reason, want) {
			t.Errorf("line %d: reason %q, want %q", i+1, reason, want)
		}
	}
	if rec, reason := parseLine([]byte(lines[2].text)); reason != "" || len(rec) != 2 || rec[1] != "Smith, B" {
		t.Fatalf("a quoted comma: %q %q", rec, reason)
	}
	for _, c := range []struct {
		file  string
		lines int64
	}{{"", 0}, {"\n", 1}, {"a", 1}, {"a\n", 1}, {"a\nb", 2}, {"a\n\n", 2}} {
		if n, _ := CountLines(strings.NewReader(c.file)); n != c.lines {
			t.Errorf("CountLines(%q) = %d, want %d", c.file, n, c.lines)
		}
	}
}
