package form

import (
	"errors"
	"net/http"
	"strings"

	"github.com/newsletter/newsletter/internal/httpbody"
)

// MaxForm is the largest form body besides an issue's (MaxIssueForm) and
// an upload.
const MaxForm = 64 << 10

// ErrTooLarge is a form body over its limit.
var ErrTooLarge = errors.New("the form is too large")

// parse reads r's url-encoded form, at most max bytes.
func parse(w http.ResponseWriter, r *http.Request, max int64) error {
	if err := httpbody.Limit(w, r, max); err != nil {
		return ErrTooLarge
	}
	if err := r.ParseForm(); err != nil {
		if httpbody.IsTooLarge(err) {
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

// Status is the answer to a form that could not be read: 413 for one
// over its cap, 400 for anything else.
func Status(err error) int {
	if errors.Is(err, ErrTooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}
