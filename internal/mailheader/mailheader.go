// Package mailheader reads a mail's header block as it is on the wire
// (CRLF lines, folded with a leading space or tab): the one reading both
// the mail's composer (mailer) and its DKIM signer (channels/email) use,
// so the fields one splits are the fields the other signs.
package mailheader

import "bytes"

// FieldLen is the length of the header field at the start of b, with its
// folded lines and final CRLF; all of b when no CRLF ends it.
func FieldLen(b []byte) int {
	n := 0
	for {
		i := bytes.Index(b[n:], []byte("\r\n"))
		if i < 0 {
			return len(b)
		}
		n += i + 2
		if n == len(b) || (b[n] != ' ' && b[n] != '\t') {
			return n
		}
	}
}
