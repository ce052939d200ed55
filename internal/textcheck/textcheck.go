// Package textcheck holds the small checks of free text that several
// services apply alike (a digest item's title and link, an event's), so
// that a limit reads the same wherever a person meets it.
package textcheck

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// The limits of digest items' and events' text, in characters (runes, not
// bytes: 300 é is a title as 300 e is).
const (
	MaxTitle   = 300
	MaxSummary = 2000
)

// HTTPURL accepts absolute http(s) links without line breaks.
func HTTPURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && !strings.ContainsAny(raw, "\r\n")
}

// OneLine is a line of at most max characters.
func OneLine(s string, max int) bool {
	return utf8.RuneCountInString(s) <= max && !strings.ContainsAny(s, "\r\n")
}
