package form

import "net/http"

// Login is the sign-in form: an account's address, password and code (a
// TOTP code or a recovery code), or a token; and where to go afterwards.
// Passwords are taken as typed (spaces count), never trimmed.
type Login struct {
	Email, Password, Code string
	Token                 string
	Next                  string
}

// NewLogin reads the sign-in form.
func NewLogin(w http.ResponseWriter, r *http.Request) (Login, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Login{}, err
	}
	return Login{Email: value(r, "email"), Password: r.PostForm.Get("password"), Code: value(r, "code"),
		Token: value(r, "token"), Next: value(r, "next")}, nil
}
