package mailer

import (
	"bytes"
	"math/rand/v2"
	"mime/quotedprintable"
	"strings"
	"testing"
)

// stdQP is what mime/quotedprintable (go-mail's encoder) writes for s.
func stdQP(s string) string {
	var b bytes.Buffer
	w := quotedprintable.NewWriter(&b)
	_, _ = w.Write([]byte(s)) // a bytes.Buffer does not fail
	_ = w.Close()
	return b.String()
}

// qpChunks encodes s with qpState, fed in the pieces cut at cuts, with the
// state copied at every cut as a prepared mail does.
func qpChunks(s string, cuts []int) string {
	var st qpState
	var out []byte
	prev := 0
	for _, c := range cuts {
		out = st.write(out, s[prev:c])
		copied := st
		st = copied
		prev = c
	}
	out = st.write(out, s[prev:])
	return string(st.close(out))
}

var qpSamples = []string{
	"",
	"plain",
	"Hello Ann Lée,\n\nhere is what is new:\n",
	strings.Repeat("x", 75) + "\n" + strings.Repeat("y", 76) + "\n" + strings.Repeat("z", 200),
	strings.Repeat("é", 60),
	"trailing space \nand tab\t\nend with space ",
	strings.Repeat("a", 73) + " \n" + strings.Repeat("b", 74) + "\t\n" + strings.Repeat("c", 75) + " ",
	"crlf\r\nlone cr\rlone lf\n\r\n\n\r",
	"\r=\n: an encoded byte after CR keeps the LF that follows it swallowed",
	"= at the end =",
	strings.Repeat("a=b ", 40),
	"<a href=\"https://example.com/x?a=1&b=2\">Café</a>\n" + strings.Repeat("ü ", 50),
	"\x00\x01\x7f\xff binary-ish",
}

func TestQPStateMatchesStandardLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range qpSamples {
		want := stdQP(s)
		if got := qpChunks(s, nil); got != want {
			t.Fatalf("%q:\n got %q\nwant %q", s, got, want)
		}
		for range 50 {
			var cuts []int
			for c := 0; c < len(s); c += 1 + rng.IntN(20) {
				cuts = append(cuts, c)
			}
			if got := qpChunks(s, cuts); got != want {
				t.Fatalf("%q cut at %v:\n got %q\nwant %q", s, cuts, got, want)
			}
		}
	}
}

func FuzzQPState(f *testing.F) {
	for _, s := range qpSamples {
		f.Add(s, uint8(7))
	}
	f.Fuzz(func(t *testing.T, s string, step uint8) {
		var cuts []int
		for c := 0; step > 0 && c < len(s); c += int(step) {
			cuts = append(cuts, c)
		}
		if got, want := qpChunks(s, cuts), stdQP(s); got != want {
			t.Fatalf("%q:\n got %q\nwant %q", s, got, want)
		}
	})
}
