package address

import (
	"strings"

	"golang.org/x/net/publicsuffix"
)

// One place decides which From a DKIM key may sign: the start-up check of
// NEWSLETTER_DKIM_DOMAIN against NEWSLETTER_FROM and the check of a From
// saved in the settings both ask DKIMAligned.

// DKIMAligned reports whether a DKIM signature of domain d aligns with From
// domain from: d is from itself or a parent of it, and not a public suffix
// (com, co.uk), which no DMARC policy lives at.
func DKIMAligned(d, from string) bool {
	from = strings.ToLower(strings.TrimSuffix(from, "."))
	if !DNSName(d) {
		return false
	}
	if d == from {
		return true
	}
	if !strings.HasSuffix(from, "."+d) {
		return false
	}
	suffix, _ := publicsuffix.PublicSuffix(d)
	return suffix != d
}

// DNSName reports whether s is a host name: dot-separated labels of
// letters, digits and inner hyphens.
func DNSName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
