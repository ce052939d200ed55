package address

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"unicode"

	"golang.org/x/net/idna"
)

// Length limits of RFC 5321: a forward path is at most 256 octets with its
// angle brackets, a local part 64, a domain label 63.
const (
	MaxLength      = 254
	MaxLocalLength = 64
	MaxLabelLength = 63
)

// idnaProfile maps a domain as a mail client looking it up would (UTS 46:
// case, width, the registered forms) and checks the bidi rule.
var idnaProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false))

// ErrInvalid is wrapped by every error Normalize returns, so callers can
// answer 400 without inspecting the reason.
var ErrInvalid = errors.New("invalid e-mail address")

// Normalize trims and lower-cases raw and checks that what remains is one
// bare address (no display name, no comments, no header injection). The
// whole address is lower-cased: local parts are case-sensitive in theory, but
// no mailbox provider treats them so, and one canonical form is what stops a
// person being subscribed twice.
//
// The domain is brought to its ASCII form (IDNA), so user@bücher.de and
// user@xn--bcher-kva.de are one subscriber, and mail to it needs nothing
// of the SMTP server. A local part must be ASCII: sending to a non-ASCII
// one needs SMTPUTF8 on every hop, which we cannot promise, so it is
// refused here rather than failing later. Unicode control, format and
// separator characters are refused anywhere, before IDNA could quietly
// drop a zero-width one.
func Normalize(raw string) (string, error) {
	if strings.ContainsAny(raw, "\r\n") {
		return "", fmt.Errorf("%w: contains a line break", ErrInvalid)
	}
	s := strings.ToLower(strings.TrimSpace(raw))
	if s == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalid)
	}
	for _, r := range s {
		if r < 0x21 || r == 0x7f || unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zs, unicode.Zl, unicode.Zp) {
			return "", fmt.Errorf("%w: contains a space, control or invisible character", ErrInvalid)
		}
	}
	at := strings.LastIndexByte(s, '@')
	if at < 1 {
		return "", fmt.Errorf("%w: no local part and domain", ErrInvalid)
	}
	local := s[:at]
	if len(local) > MaxLocalLength {
		return "", fmt.Errorf("%w: the part before the @ is longer than %d octets", ErrInvalid, MaxLocalLength)
	}
	for i := 0; i < len(local); i++ {
		if local[i] >= 0x80 {
			return "", fmt.Errorf("%w: the part before the @ must be ASCII", ErrInvalid)
		}
	}
	domain, err := idnaProfile.ToASCII(s[at+1:])
	if err == nil {
		// The mapping can turn a label into one the rules refuse (U+2138
		// DALET SYMBOL, left-to-right, maps to the Hebrew letter, which is
		// right-to-left, beside a label that starts with a digit): the
		// address kept must be one that normalises to itself.
		_, err = idnaProfile.ToASCII(domain)
	}
	if err != nil {
		return "", fmt.Errorf("%w: the domain: %v", ErrInvalid, err)
	}
	for _, label := range strings.Split(domain, ".") {
		if len(label) > MaxLabelLength {
			return "", fmt.Errorf("%w: a part of the domain is longer than %d octets", ErrInvalid, MaxLabelLength)
		}
	}
	s = local + "@" + domain
	if len(s) > MaxLength {
		return "", fmt.Errorf("%w: longer than %d characters", ErrInvalid, MaxLength)
	}
	parsed, err := mail.ParseAddress(s)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	// ParseAddress accepts "Name <a@b>" and quoted local parts; only a bare
	// address that round-trips to itself is what the person typed.
	if parsed.Name != "" || parsed.Address != s {
		return "", fmt.Errorf("%w: not a bare address", ErrInvalid)
	}
	if !strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || strings.Contains(domain, "..") {
		return "", fmt.Errorf("%w: the domain needs a dot", ErrInvalid)
	}
	if strings.HasPrefix(domain, "[") {
		return "", fmt.Errorf("%w: address literals are not accepted", ErrInvalid)
	}
	return s, nil
}

// Domain returns the part after the last '@', used to label logs and
// metrics without exposing the whole address.
func Domain(addr string) string {
	if at := strings.LastIndexByte(addr, '@'); at >= 0 {
		return addr[at+1:]
	}
	return ""
}
