package form

import "net/http"

// Token is the form that creates a token.
type Token struct {
	Name, Role string
}

// NewToken reads the token form.
func NewToken(w http.ResponseWriter, r *http.Request) (Token, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Token{}, err
	}
	return Token{Name: value(r, "name"), Role: value(r, "role")}, nil
}
