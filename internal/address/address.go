package address

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"
)

// MaxLength is the longest address accepted: RFC 5321 limits a forward path
// to 256 octets including the angle brackets.
const MaxLength = 254

// ErrInvalid is wrapped by every error Normalize returns, so callers can
// answer 400 without inspecting the reason.
var ErrInvalid = errors.New("invalid e-mail address")

// Normalize trims and lower-cases raw and checks that what remains is one
// bare address (no display name, no comments, no header injection). The
// whole address is lower-cased: local parts are case-sensitive in theory, but
// no mailbox provider treats them so, and one canonical form is what stops a
// person being subscribed twice.
func Normalize(raw string) (string, error) {
	if strings.ContainsAny(raw, "\r\n") {
		return "", fmt.Errorf("%w: contains a line break", ErrInvalid)
	}
	s := strings.ToLower(strings.TrimSpace(raw))
	if s == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalid)
	}
	if len(s) > MaxLength {
		return "", fmt.Errorf("%w: longer than %d characters", ErrInvalid, MaxLength)
	}
	for _, r := range s {
		if r < 0x21 || r == 0x7f {
			return "", fmt.Errorf("%w: contains a space or control character", ErrInvalid)
		}
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
	at := strings.LastIndexByte(s, '@')
	domain := s[at+1:]
	if at < 1 || !strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || strings.Contains(domain, "..") {
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
