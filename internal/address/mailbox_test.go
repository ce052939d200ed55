package address

import (
	"errors"
	"strings"
	"testing"
)

func TestMailbox(t *testing.T) {
	for in, want := range map[string]string{
		"victim@example.com":          "victim@example.com",
		"victim+1@example.com":        "victim@example.com",
		"victim+a+b@example.com":      "victim@example.com",
		"Victim+X@Example.COM":        "victim@example.com",
		"first.last@example.com":      "first.last@example.com", // dots matter outside Gmail
		"first.last+news@gmail.com":   "firstlast@gmail.com",
		"f.i.r.s.t.last@gmail.com":    "firstlast@gmail.com",
		"First.Last@googlemail.com":   "firstlast@gmail.com",
		"first.last@mail.gmail.com":   "first.last@mail.gmail.com", // not Gmail's own domain
		"+tag@example.com":            "+tag@example.com",          // no mailbox before the tag
		"..@gmail.com":                "..@gmail.com",
		"user@xn--bcher-kva.de":       "user@xn--bcher-kva.de",
		"user+x@xn--bcher-kva.de":     "user@xn--bcher-kva.de",
		"no-at-sign":                  "no-at-sign",
		"a.b+c@googlemail.com":        "ab@gmail.com",
		"john.smith=work@example.org": "john.smith=work@example.org",
	} {
		if got := Mailbox(in); got != want {
			t.Errorf("Mailbox(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzMailbox: for every address Normalize accepts, Mailbox is a fixed
// point after one step, keeps the domain family, never grows the address,
// and every +tag of a mailbox counts as that mailbox.
func FuzzMailbox(f *testing.F) {
	for _, s := range []string{"victim@example.com", "v+1@example.com", "a.b@gmail.com", "A.B+x@googlemail.com", "+x@y.co", "a+@b.co", "x@xn--bcher-kva.de"} {
		f.Add(s, "tag")
	}
	f.Fuzz(func(t *testing.T, raw, tag string) {
		addr, err := Normalize(raw)
		if err != nil {
			return
		}
		got := Mailbox(addr)
		if Mailbox(got) != got {
			t.Fatalf("Mailbox(%q) = %q, but Mailbox of that is %q", addr, got, Mailbox(got))
		}
		if len(got) > len(addr) || got != strings.ToLower(got) {
			t.Fatalf("Mailbox(%q) = %q grew or kept upper case", addr, got)
		}
		at := strings.LastIndexByte(addr, '@')
		local, domain := addr[:at], addr[at+1:]
		if d := Domain(got); d != domain && !(domain == "googlemail.com" && d == "gmail.com") {
			t.Fatalf("Mailbox(%q) = %q changed the domain", addr, got)
		}
		if strings.Contains(local, "+") {
			return
		}
		tagged, err := Normalize(local + "+" + tag + "@" + domain)
		if err != nil {
			return
		}
		if Mailbox(tagged) != got {
			t.Fatalf("%q and %q are one mailbox, got %q and %q", addr, tagged, got, Mailbox(tagged))
		}
	})
}

func TestCheckName(t *testing.T) {
	for in, want := range map[string]string{
		"":                "",
		"  Ann Example  ": "Ann Example",
		"Zoë O'Brien":     "Zoë O'Brien",
		"李小龍":             "李小龍",
		"FREE iPhone! Claim at https://evil.example.com/win": "FREE iPhone! Claim at https://evil.example.com/win",
	} {
		if got, err := CheckName(in); err != nil || got != want {
			t.Errorf("CheckName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"Ann\x00", "Ann\r\nBcc: x@y.z", "Ann\nB", "Ann\tB", "Ann\x1fB", "Ann\x7f",
		"A\u0085nn",              // NEL (Cc)
		"moc.live\u202e",         // right-to-left override (Cf)
		"A\u200bnn", "Ann\ufeff", // zero-width space, BOM (Cf)
		"Ann\u2028B", "Ann\u2029B", // line and paragraph separators
		"Ann\xff", // not UTF-8
		strings.Repeat("a", 101),
	} {
		if got, err := CheckName(in); !errors.Is(err, ErrInvalidName) {
			t.Errorf("CheckName(%q) = %q, %v; want ErrInvalidName", in, got, err)
		}
	}
}
