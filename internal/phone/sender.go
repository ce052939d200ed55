package phone

import "regexp"

// e164 and shortCode are the shapes of a sending number: a sender may be
// a toll-free number or a short code, which Parse (mobiles only)
// refuses, so its shape is checked alone.
var (
	e164      = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
	shortCode = regexp.MustCompile(`^[0-9]{3,8}$`)
)

// IsSenderNumber reports whether from has the shape of a number texts
// may be sent from: E.164 (+15005550006) or a short code (12345).
func IsSenderNumber(from string) bool {
	return e164.MatchString(from) || shortCode.MatchString(from)
}
