package address

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mailbox is the mailbox an address delivers to, as far as we can tell
// from the address alone: the key of every per-address limit (the
// confirmation cooldown and daily cap, the unsubscribe link's cooldown).
// Many spellings reach one inbox, and someone flooding a victim through
// our forms would use them all:
//
//   - a "+tag" after the local part (victim+1@example.com) is delivered to
//     victim@example.com by nearly every provider, so it is cut off;
//   - Gmail ignores dots in the local part and treats googlemail.com as
//     gmail.com.
//
// The subscriber keeps the address as typed (normalised): Mailbox only
// names the limit it counts against. addr must come from Normalize; other
// input gets a best effort (lower case), never an error. A local part that
// is nothing but a tag ("+x@…") is kept whole: it names no other mailbox.
func Mailbox(addr string) string {
	addr = strings.ToLower(addr)
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return addr
	}
	local, domain := addr[:at], addr[at+1:]
	if plus := strings.IndexByte(local, '+'); plus > 0 {
		local = local[:plus]
	}
	switch domain {
	case "googlemail.com":
		domain = "gmail.com"
		fallthrough
	case "gmail.com":
		if bare := strings.ReplaceAll(local, ".", ""); bare != "" {
			local = bare
		}
	}
	return local + "@" + domain
}

// MaxNameLength is the longest name a person may give, in bytes.
const MaxNameLength = 100

// ErrInvalidName is wrapped by every error CheckName returns.
var ErrInvalidName = errors.New("invalid name")

// CheckName trims a name a person typed (the signup form, the preference
// centre, an import's name column) and checks it: one line of at most
// MaxNameLength bytes with no control or format character and no line or
// paragraph separator (Unicode Cc, Cf, Zl, Zp). Those are invisible or
// reorder what a reader sees (U+202E turns "moc.live" around), break a
// header (NUL, CR, LF) or make a mail unrenderable; no one's name needs
// them. An empty name is fine.
func CheckName(raw string) (string, error) {
	name := strings.TrimSpace(raw)
	if len(name) > MaxNameLength {
		return "", fmt.Errorf("%w: the name must be at most %d characters", ErrInvalidName, MaxNameLength)
	}
	if !utf8.ValidString(name) {
		return "", fmt.Errorf("%w: the name is not valid UTF-8", ErrInvalidName)
	}
	for _, r := range name {
		if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			return "", fmt.Errorf("%w: the name must be one line without control or invisible formatting characters", ErrInvalidName)
		}
	}
	return name, nil
}
