package sms

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
)

// Encoding is the alphabet a text travels in, which sets how much fits
// in one SMS.
type Encoding string

// The two encodings a gateway picks between (3GPP TS 23.038).
const (
	// GSM7 is the GSM 03.38 default alphabet, 7 bits a character.
	GSM7 Encoding = "GSM-7"
	// UCS2 is 16 bits a character (UTF-16 in practice), used as soon as one
	// character is outside GSM-7.
	UCS2 Encoding = "UCS-2"
)

// Capacities of one SMS (140 bytes), alone and as a part of a
// concatenated message, whose 6-byte header (UDH) takes 7 septets or 3
// UTF-16 units of each part.
const (
	gsmSingle   = 160
	gsmSegment  = 153
	ucs2Single  = 70
	ucs2Segment = 67
)

// gsmBasic is GSM 03.38's default alphabet but for its escape (0x1B),
// which only leads an extension character and is not text of its own.
const gsmBasic = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?" +
	"¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"

// gsmExtension is the extension table's characters every handset has:
// each is sent as the escape and a septet, so costs two.
const gsmExtension = "\f^{}\\[~]|€"

// Measure says how text travels: its encoding, the segments (SMS billed)
// it takes, and its length in that encoding's units (septets for GSM-7,
// UTF-16 code units for UCS-2). An empty text takes 0 segments.
//
// Splitting is modelled as gateways do it: a two-septet extension
// character or a surrogate pair (an emoji) is never cut between two
// segments, so a segment may carry one unit less than its capacity.
func Measure(text string) (enc Encoding, segments int, units int) {
	enc = GSM7
	for _, r := range text {
		if !strings.ContainsRune(gsmBasic, r) && !strings.ContainsRune(gsmExtension, r) {
			enc = UCS2
			break
		}
	}
	single, perSegment := gsmSingle, gsmSegment
	if enc == UCS2 {
		single, perSegment = ucs2Single, ucs2Segment
	}
	segments, inSegment := 0, 0
	for _, r := range text {
		cost := runeUnits(enc, r)
		units += cost
		if segments == 0 || inSegment+cost > perSegment {
			segments++
			inSegment = 0
		}
		inSegment += cost
	}
	if units <= single {
		// It fits one SMS without the concatenation header.
		return enc, min(segments, 1), units
	}
	return enc, segments, units
}

// runeUnits is what r costs in enc.
func runeUnits(enc Encoding, r rune) int {
	if enc == GSM7 {
		if strings.ContainsRune(gsmExtension, r) {
			return 2
		}
		return 1
	}
	// Ranging over a string gives U+FFFD for bytes that are not UTF-8,
	// so r is always encodable; only runes past the BMP take a pair.
	if n := utf16.RuneLen(r); n > 0 {
		return n
	}
	return 1
}

// ErrEmptyText is CheckLength's answer for a text with nothing to read
// (empty or only white space): the gateway would refuse it (21602), and a
// reader would get nothing.
var ErrEmptyText = errors.New("sms: the text is empty")

// TooLongError is a text that takes more segments than allowed.
type TooLongError struct {
	Segments int
	Max      int
	Encoding Encoding
}

func (e *TooLongError) Error() string {
	msg := fmt.Sprintf("sms: the text takes %d segments in %s, more than the %d allowed", e.Segments, e.Encoding, e.Max)
	if e.Encoding == UCS2 {
		msg += " (a character outside GSM-7, such as an emoji, halves what fits)"
	}
	return msg
}

// CheckLength refuses an empty text (ErrEmptyText) and one longer than
// maxSegments (*TooLongError); a maxSegments below 1 allows one.
func CheckLength(text string, maxSegments int) error {
	if strings.TrimSpace(text) == "" {
		return ErrEmptyText
	}
	maxSegments = max(maxSegments, 1)
	enc, segments, _ := Measure(text)
	if segments > maxSegments {
		return &TooLongError{Segments: segments, Max: maxSegments, Encoding: enc}
	}
	return nil
}
