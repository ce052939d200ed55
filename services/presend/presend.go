// Package presend is the checks an issue passes before it is sent, and
// that its preview shows: its size against Gmail's clip, its links,
// images without alt text, the postal address, and a spam-content score
// from the rules the service can judge of its own mail. Each check is a
// small function returning zero or more results; the API, the console
// and the send step (services/issues) run the same list.
package presend

import (
	"context"
	"fmt"
	"strings"
)

// Levels of a result: an error refuses a send unless overridden; a
// warning is for the publisher to read; ok says the check passed.
const (
	Error   = "error"
	Warning = "warning"
	OK      = "ok"
)

// Gmail clips a mail whose HTML is over about 102 KB: the reader sees
// "[Message clipped]  View entire message", and what is cut off (the
// footer with the unsubscribe link and the postal address, the open
// pixel) is gone from the mail. The guard counts in thousands of bytes,
// the lower reading of "102 KB", so it errs on the side of a warning.
const (
	// ClipBytes is the HTML part over which a send is refused unless
	// forced.
	ClipBytes = 102_000
	// WarnBytes is the HTML part over which the preview and the send
	// step warn: close to the clip, and a reader's longer address or
	// links can cross it.
	WarnBytes = 90_000
)

// Result is one line of the checks: which check, how bad, what it found
// and how to fix it.
type Result struct {
	Check   string `json:"check"`
	Level   string `json:"level"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// Mail is what the checks judge: the mail as a reader gets it, and the
// issue's own body.
type Mail struct {
	Subject string
	// HTML and Text are the mail's parts as a reader gets them (Text ""
	// is a mail with no text part).
	HTML, Text string
	// HTMLBytes is the HTML part's size as sent (links counted, a
	// reader's token in them); 0 means HTML's length.
	HTMLBytes int
	// Body is the body as HTML, its links as the writer wrote
	// them (not through the counted redirect); "" means HTML's.
	Body string
	// PostalAddress is the settings' ("" none); SkipPostal leaves it
	// unjudged (a caller without the settings).
	PostalAddress string
	SkipPostal    bool
}

// Checker runs the checks. Links nil checks no link (a process that may
// not call out).
type Checker struct {
	Links *LinkChecker
}

// Run is every check of m, in the order the preview shows them.
func (c *Checker) Run(ctx context.Context, m Mail) []Result {
	if m.HTMLBytes == 0 {
		m.HTMLBytes = len(m.HTML)
	}
	if m.Body == "" {
		m.Body = m.HTML
	}
	mail, body := parseHTML(m.HTML), parseHTML(m.Body)
	var out []Result
	out = append(out, Size(m.HTMLBytes))
	if c != nil && c.Links != nil {
		out = append(out, c.Links.Check(ctx, body.hrefs())...)
	}
	out = append(out, ImagesAlt(mail))
	if !m.SkipPostal {
		out = append(out, Postal(m.PostalAddress))
	}
	out = append(out, Spam(m.Subject, m.Text, mail, body))
	return out
}

// Errors are the results of level Error in rs.
func Errors(rs []Result) []Result {
	var out []Result
	for _, r := range rs {
		if r.Level == Error {
			out = append(out, r)
		}
	}
	return out
}

// Summary is rs's errors in one line, for a refusal.
func Summary(rs []Result) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, r.Check+": "+r.Message)
	}
	return strings.Join(parts, "; ")
}

// KB is n bytes as a publisher reads it: "93.4 KB" (thousands of
// bytes, as the limits are counted).
func KB(n int) string { return fmt.Sprintf("%.1f KB", float64(n)/1000) }

// Size judges the HTML part of n bytes against Gmail's clip.
func Size(n int) Result {
	r := Result{Check: "size", Level: OK, Message: fmt.Sprintf("The HTML part is %s, under the %s at which Gmail clips a mail.", KB(n), KB(ClipBytes))}
	switch {
	case n > ClipBytes:
		r.Level = Error
		r.Message = fmt.Sprintf("The HTML part is %s: over %s, Gmail clips it and its readers lose the end, the unsubscribe link with it.", KB(n), KB(ClipBytes))
		r.Fix = "Shorten the issue (fewer or shorter sections, fewer links); a send is refused unless forced."
	case n > WarnBytes:
		r.Level = Warning
		r.Message = fmt.Sprintf("The HTML part is %s: close to the %s at which Gmail clips a mail.", KB(n), KB(ClipBytes))
		r.Fix = "Consider shortening it: a reader's longer address or links can cross the clip."
	}
	return r
}

// ImagesAlt warns of images without alt text: many mail clients block
// images at first, and a screen reader reads the alt text.
func ImagesAlt(d *doc) Result {
	var missing []string
	for _, im := range d.images {
		if !im.hasAlt {
			missing = append(missing, clip(im.src, 80))
		}
	}
	if len(missing) == 0 {
		return Result{Check: "images_alt", Level: OK, Message: fmt.Sprintf("Every image (%d) has alt text.", len(d.images))}
	}
	return Result{Check: "images_alt", Level: Warning,
		Message: fmt.Sprintf("%d image(s) without alt text: %s.", len(missing), strings.Join(firstN(missing, 5), ", ")),
		Fix:     "Describe each image in Markdown's brackets: ![What the picture shows](https://…); a purely decorative one may say so."}
}

// Postal warns when no postal address is set: bulk mail must carry the
// sender's (CAN-SPAM and others), and the footer shows it.
func Postal(addr string) Result {
	if strings.TrimSpace(addr) == "" {
		return Result{Check: "postal_address", Level: Warning, Message: "No postal address is set: the footer shows none, and bulk mail must carry the sender's (CAN-SPAM and others).",
			Fix: "Set one at /admin/settings or with PUT /api/settings (postal_address)."}
	}
	return Result{Check: "postal_address", Level: OK, Message: "The footer carries the postal address."}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
