package form

import "net/http"

// Login is the sign-in form: a token and where to go afterwards.
type Login struct {
	Token string
	Next  string
}

// NewLogin reads the sign-in form.
func NewLogin(w http.ResponseWriter, r *http.Request) (Login, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Login{}, err
	}
	return Login{Token: value(r, "token"), Next: value(r, "next")}, nil
}
