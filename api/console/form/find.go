package form

import "net/http"

// Find is the subscriber search: one address, sent in a form body so it
// never lands in a URL (proxy logs, the browser's history).
type Find struct {
	Email string
}

// NewFind reads the search form.
func NewFind(w http.ResponseWriter, r *http.Request) (Find, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Find{}, err
	}
	return Find{Email: value(r, "email")}, nil
}
