package sms_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/newsletter/newsletter/channels/sms"
)

func TestMeasure(t *testing.T) {
	emoji := "😀" // U+1F600, outside the BMP: a surrogate pair
	for _, c := range []struct {
		name     string
		text     string
		enc      sms.Encoding
		segments int
		units    int
	}{
		{"empty", "", sms.GSM7, 0, 0},
		{"one character", "a", sms.GSM7, 1, 1},
		{"160 GSM fit one SMS", strings.Repeat("a", 160), sms.GSM7, 1, 160},
		{"161 GSM take two", strings.Repeat("a", 161), sms.GSM7, 2, 161},
		{"306 GSM fill two segments", strings.Repeat("a", 306), sms.GSM7, 2, 306},
		{"307 GSM take three", strings.Repeat("a", 307), sms.GSM7, 3, 307},
		{"one letter outside GSM (û) makes UCS-2", "Ça coûte 5€? Ñoño ΔΩ é à ü", sms.UCS2, 1, 26},
		{"GSM accents stay GSM", "Ça va? Ñoño ΔΩ é à ü £$¥§¿¡", sms.GSM7, 1, 27},
		{"extension chars count two", "{}[]~^|\\€\f", sms.GSM7, 1, 20},
		{"80 euro signs fill one SMS", strings.Repeat("€", 80), sms.GSM7, 1, 160},
		{"81 euro signs take two", strings.Repeat("€", 81), sms.GSM7, 2, 162},
		// 152 septets then a two-septet character: it does not fit the
		// 153rd septet, so the first segment carries 152.
		{"extension char not split", strings.Repeat("a", 152) + "€" + strings.Repeat("a", 152), sms.GSM7, 3, 306},
		{"70 UCS-2 fit one SMS", strings.Repeat("ж", 70), sms.UCS2, 1, 70},
		{"71 UCS-2 take two", strings.Repeat("ж", 71), sms.UCS2, 2, 71},
		{"134 UCS-2 fill two segments", strings.Repeat("ж", 134), sms.UCS2, 2, 134},
		{"135 UCS-2 take three", strings.Repeat("ж", 135), sms.UCS2, 3, 135},
		{"one non-GSM char turns it all UCS-2", strings.Repeat("a", 70) + "ç", sms.UCS2, 2, 71},
		{"emoji counts two", emoji, sms.UCS2, 1, 2},
		{"35 emoji fit one SMS", strings.Repeat(emoji, 35), sms.UCS2, 1, 70},
		{"36 emoji take two", strings.Repeat(emoji, 36), sms.UCS2, 2, 72},
		// 66 units then an emoji: the pair does not fit the 67th unit.
		{"surrogate pair not split", strings.Repeat("ж", 66) + emoji + strings.Repeat("ж", 66), sms.UCS2, 3, 134},
		{"escape itself is not GSM text", "\x1b", sms.UCS2, 1, 1},
		{"invalid UTF-8 is UCS-2", "a\xffb", sms.UCS2, 1, 3},
	} {
		enc, segments, units := sms.Measure(c.text)
		if enc != c.enc || segments != c.segments || units != c.units {
			t.Errorf("%s: Measure = %s, %d segments, %d units; want %s, %d, %d",
				c.name, enc, segments, units, c.enc, c.segments, c.units)
		}
	}
}

// TestGSMAlphabet holds every character of GSM 03.38's default alphabet
// (but the escape) to one septet, and a few look-alikes outside it to UCS-2.
func TestGSMAlphabet(t *testing.T) {
	basic := "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?" +
		"¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
	if n := utf8.RuneCountInString(basic); n != 127 {
		t.Fatalf("the test's alphabet has %d characters, want 128 less the escape", n)
	}
	if enc, _, units := sms.Measure(basic); enc != sms.GSM7 || units != 127 {
		t.Errorf("the GSM alphabet measures %s, %d units; want GSM-7, 127", enc, units)
	}
	for _, r := range "çÀâêîôûœ`\t’“”…" {
		if enc, _, _ := sms.Measure(string(r)); enc != sms.UCS2 {
			t.Errorf("%q measures %s, want UCS-2: it is not in GSM 03.38", r, enc)
		}
	}
}

func TestCheckLength(t *testing.T) {
	for _, text := range []string{"", " \n\t"} {
		if err := sms.CheckLength(text, 2); !errors.Is(err, sms.ErrEmptyText) {
			t.Errorf("CheckLength(%q) = %v, want ErrEmptyText", text, err)
		}
	}
	if err := sms.CheckLength(strings.Repeat("a", 306), 2); err != nil {
		t.Errorf("two full GSM segments under a cap of 2: %v", err)
	}
	err := sms.CheckLength(strings.Repeat("a", 307), 2)
	var tl *sms.TooLongError
	if !errors.As(err, &tl) || tl.Segments != 3 || tl.Max != 2 || tl.Encoding != sms.GSM7 {
		t.Errorf("307 GSM characters under a cap of 2: %v (%+v), want a TooLongError of 3 > 2 in GSM-7", err, tl)
	}
	err = sms.CheckLength(strings.Repeat("a", 100)+"😀", 1)
	if !errors.As(err, &tl) || tl.Segments != 2 || tl.Encoding != sms.UCS2 {
		t.Errorf("an emoji in 100 characters under a cap of 1: %v, want 2 segments in UCS-2", err)
	}
	if err := sms.CheckLength(strings.Repeat("a", 161), 0); !errors.As(err, &tl) || tl.Max != 1 {
		t.Errorf("a cap of 0 counts as 1: got %v", err)
	}
}
