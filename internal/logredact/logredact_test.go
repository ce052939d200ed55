package logredact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

var testRedactor = New([]byte("0123456789abcdef"))

func TestNoAddressInTheLog(t *testing.T) {
	r := testRedactor
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewTextHandler(&buf, nil))).With("who", "Ann@Example.com")
	log.Info("task welcome:ann@example.com done", "id", "confirm:o'neil+x@sub.example.org",
		"err", errors.New("subscribe ann@example.com: redis down"), slog.Group("g", "to", "bob@example.net"),
		"ids", []string{"welcome:carl@example.com"})
	out := buf.String()
	for _, leak := range []string{"ann@", "Ann@", "neil", "bob@", "carl"} {
		if strings.Contains(out, leak) {
			t.Fatalf("an address reached the log: %s", out)
		}
	}
	p := r.Pseudonym("ann@example.com")
	if !strings.HasPrefix(p, "example.com#") || strings.Count(out, p) != 3 {
		t.Fatalf("want the same pseudonym %s three times (one person, three mentions): %s", p, out)
	}
	if r.Redact("no address here, 10:00 @noon") != "no address here, 10:00 @noon" {
		t.Fatal("text without an address changed")
	}
}

// TestNoPartOfTheLocalPart: local parts with characters that are no
// letters (= ' + / quotes) are hidden whole, wherever they stand.
func TestNoPartOfTheLocalPart(t *testing.T) {
	r := testRedactor
	for _, c := range []struct{ in, local, domain string }{
		{"john.smith=work@example.org", "john.smith=work", "example.org"},
		{"o'brien@example.ie", "o'brien", "example.ie"},
		{"send to john.smith=work@example.org failed", "john.smith=work", "example.org"},
		{"task confirm:o'brien@example.ie", "o'brien", "example.ie"},
		{`address "o'brien@example.ie"`, "o'brien", "example.ie"},
		{"<a/b{c}|d~e^f`g#h$i%j&k*l?m!n@example.com>", "a/b{c}|d~e^f`g#h$i%j&k*l?m!n", "example.com"},
		{`"john(smith),work"@example.org`, "john(smith),work", "example.org"},
		{`id=confirm:"john<smith>;work"@example.org,`, "john<smith>;work", "example.org"},
		{`to "\"john@smith\""@example.org.`, `john@smith`, "example.org"},
		{"ann@x.example+bob@y.example", "bob", "y.example"},
		{"RENÉ.Zoë@Bücher.example", "rené.zoë", "bücher.example"},
	} {
		got := r.Redact(c.in)
		for _, part := range regexp.MustCompile(`[^a-zA-Z0-9\x80-\x{10FFFF}]+`).Split(c.local, -1) {
			if len(part) > 1 && strings.Contains(strings.ToLower(got), strings.ToLower(part)) {
				t.Errorf("Redact(%q) = %q: %q of the local part shows", c.in, got, part)
			}
		}
		if !strings.Contains(got, c.domain+"#") {
			t.Errorf("Redact(%q) = %q: want the domain %s and a hash", c.in, got, c.domain)
		}
	}
	// The whole address is hashed: two people of one domain differ, and
	// one person is the same whatever the case.
	a, b := r.Pseudonym("john.smith=work@example.org"), r.Pseudonym("john.smith=home@example.org")
	if a == b || a != r.Pseudonym("John.Smith=Work@Example.ORG") {
		t.Fatalf("pseudonyms %s %s", a, b)
	}
	if !regexp.MustCompile(`^example\.org#[0-9a-f]{16}$`).MatchString(a) {
		t.Fatalf("pseudonym %q: want the domain and 16 hex digits", a)
	}
}

// TestPseudonymIsKeyed: without the secret, a guessed address cannot be
// checked against a log line; with the same secret, the same address
// gives the same pseudonym in every process.
func TestPseudonymIsKeyed(t *testing.T) {
	const addr = "zoe@example.com"
	same, other := New([]byte("0123456789abcdef")), New([]byte("another secret!!"))
	if testRedactor.Hash(addr) != same.Hash(addr) {
		t.Fatal("one secret, two hashes")
	}
	if testRedactor.Hash(addr) == other.Hash(addr) {
		t.Fatal("the hash does not depend on the secret")
	}
	// Nor is it a plain hash of the address anyone could compute.
	plain := sha256.Sum256([]byte(addr))
	if strings.Contains(testRedactor.Pseudonym(addr), hex.EncodeToString(plain[:4])) {
		t.Fatal("the pseudonym is an unkeyed hash")
	}
}

func TestClip(t *testing.T) {
	if got := Clip("short"); got != "short" {
		t.Fatalf("a short value changed: %q", got)
	}
	long := strings.Repeat("a", MaxClientBytes-1) + "é" + strings.Repeat("b", 1<<20)
	got := Clip(long)
	want := strings.Repeat("a", MaxClientBytes-1) + fmt.Sprintf("…(+%d bytes)", len(long)-(MaxClientBytes-1))
	if got != want {
		t.Fatalf("Clip of %d bytes: %q…, want %q", len(long), got[:min(len(got), 20)], want[MaxClientBytes-5:])
	}
	if !utf8.ValidString(got) {
		t.Fatal("Clip cut a character in two")
	}
}
