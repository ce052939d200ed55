package form

import (
	"net/http"
	"strings"
)

// TestSend is the test-send form: the boxes ticked and the addresses
// typed (separated by commas, spaces or line breaks), all named emails.
type TestSend struct {
	Emails []string
}

// NewTestSend reads the test-send form.
func NewTestSend(w http.ResponseWriter, r *http.Request) (TestSend, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return TestSend{}, err
	}
	return TestSend{Emails: list(strings.Join(r.PostForm["emails"], ","))}, nil
}
