package address

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	good := map[string]string{
		"  Ann@Example.COM ":      "ann@example.com",
		"a.b+tag@sub.example.org": "a.b+tag@sub.example.org",
		"x@example.co":            "x@example.co",
		// One subscriber whichever way the domain is written.
		"user@bücher.de":                         "user@xn--bcher-kva.de",
		"user@xn--bcher-kva.de":                  "user@xn--bcher-kva.de",
		"user@BÜCHER.de":                         "user@xn--bcher-kva.de",
		strings.Repeat("a", 64) + "@example.com": strings.Repeat("a", 64) + "@example.com",
	}
	for in, want := range good {
		got, err := Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := []string{
		"", "   ", "plain", "@example.com", "a@", "a@b", "a@.com", "a@b..com",
		"Ann <ann@example.com>", "ann@example.com\r\nBcc: x@y.z", "ann@example.com\n",
		"a b@example.com", `"q"@example.com`, "a@[127.0.0.1]", "a@b.com,c@d.com",
		strings.Repeat("a", 250) + "@example.com",
		// Unicode control, format and separator characters: a right-to-
		// left override, a zero-width space, a line separator, NEL.
		"ann\u202e@example.com", "ann@exa\u200bmple.com", "ann\u2028@example.com", "ann\u0085@example.com",
		"ann\u00a0x@example.com",
		// The limits: a local part over 64 octets, a label over 63, the whole over 254.
		strings.Repeat("a", 65) + "@example.com",
		"ann@" + strings.Repeat("b", 64) + ".com",
		"ann@" + strings.Repeat(strings.Repeat("c", 60)+".", 5) + "com",
		// A non-ASCII local part would need SMTPUTF8 on every hop.
		"jürgen@example.com",
	}
	for _, in := range bad {
		if got, err := Normalize(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("Normalize(%q) = %q, %v; want ErrInvalid", in, got, err)
		}
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"ann@example.com", " A@B.CO ", "a\r\n@b.c", "Ann <a@b.c>", `"x y"@b.c`, "a@b", "", "a@[1.2.3.4]", "ä@ü.de",
		"user@bücher.de", "user@xn--bcher-kva.de", "ann\u202e@example.com", "ann@exa\u200bmple.com", "a\u2028@b.co", "a\u0085@b.co",
		strings.Repeat("a", 65) + "@b.co", "a@" + strings.Repeat("b", 64) + ".co", "a@xn--.co", "a@ａｂｃ.co"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := Normalize(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if strings.ContainsAny(got, "\r\n <>,\"") {
			t.Fatalf("Normalize(%q) = %q lets a header-breaking character through", raw, got)
		}
		if got != strings.ToLower(got) || len(got) > MaxLength {
			t.Fatalf("Normalize(%q) = %q is not canonical", raw, got)
		}
		for i := 0; i < len(got); i++ {
			if got[i] >= 0x80 {
				t.Fatalf("Normalize(%q) = %q is not ASCII: SMTP without SMTPUTF8 cannot carry it", raw, got)
			}
		}
		again, err := Normalize(got)
		if err != nil || again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", raw, got, again, err)
		}
	})
}
