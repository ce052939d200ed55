package form

import "net/http"

// TestSend is the test-send form: addresses separated by commas, spaces
// or line breaks.
type TestSend struct {
	Emails []string
}

// NewTestSend reads the test-send form.
func NewTestSend(w http.ResponseWriter, r *http.Request) (TestSend, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return TestSend{}, err
	}
	return TestSend{Emails: list(r.PostForm.Get("emails"))}, nil
}
