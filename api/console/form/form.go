package form

import (
	"errors"
	"net/http"
	"strings"
)

// MaxForm is the largest form body besides an issue's (MaxIssueForm) and
// an upload.
const MaxForm = 64 << 10

// ErrTooLarge is a form body over its limit.
var ErrTooLarge = errors.New("the form is too large")

// parse reads r's url-encoded form, at most max bytes.
func parse(w http.ResponseWriter, r *http.Request, max int64) error {
	r.Body = http.MaxBytesReader(w, r.Body, max)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return ErrTooLarge
		}
		return errors.New("the form could not be read")
	}
	return nil
}

func value(r *http.Request, name string) string { return strings.TrimSpace(r.PostForm.Get(name)) }

// list splits a field of addresses or ids at commas, semicolons, spaces
// and line breaks.
func list(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ';' || r == ' ' || r == '\n' || r == '\r' || r == '\t'
	})
}
