package address

import (
	"strings"
	"unicode/utf8"
)

// Masked is addr as a page shows it to whoever holds a link (which may
// have been forwarded): the first letter of the mailbox and of the
// domain, and the domain's last label, such as j***@e***.com.
func Masked(addr string) string {
	local, domain, ok := strings.Cut(addr, "@")
	if !ok {
		return firstLetter(addr) + "***"
	}
	out := firstLetter(local) + "***@" + firstLetter(domain) + "***"
	if i := strings.LastIndexByte(domain, '.'); i > 0 {
		out += domain[i:]
	}
	return out
}

func firstLetter(s string) string {
	_, n := utf8.DecodeRuneInString(s)
	return s[:n]
}
