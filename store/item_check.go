package store

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/newsletter/newsletter/internal/textcheck"
)

// ErrBadItem is an item CheckItem refuses.
var ErrBadItem = fmt.Errorf("want a title (one line, at most %d characters), an http(s) url and an optional summary (at most %d characters)", textcheck.MaxTitle, textcheck.MaxSummary)

// CheckItem is the one check of a digest item, for the API and the
// console alike: it returns it trimmed, or ErrBadItem. The topic is the
// caller's to check against the topics file.
func CheckItem(it Item) (Item, error) {
	it.Title, it.URL, it.Summary = strings.TrimSpace(it.Title), strings.TrimSpace(it.URL), strings.TrimSpace(it.Summary)
	if it.Title == "" || !textcheck.OneLine(it.Title, textcheck.MaxTitle) || !textcheck.HTTPURL(it.URL) || utf8.RuneCountInString(it.Summary) > textcheck.MaxSummary {
		return it, ErrBadItem
	}
	return it, nil
}
