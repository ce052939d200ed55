package form

import "net/http"

// Invite is the form that invites a colleague (/admin/accounts).
type Invite struct {
	Email, Role string
}

// NewInvite reads the invite form.
func NewInvite(w http.ResponseWriter, r *http.Request) (Invite, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Invite{}, err
	}
	return Invite{Email: value(r, "email"), Role: value(r, "role")}, nil
}

// Accept is the invite page's form: the new password twice and the
// first code of the authenticator app.
type Accept struct {
	Password, Repeat, Code string
}

// NewAccept reads the invite page's form.
func NewAccept(w http.ResponseWriter, r *http.Request) (Accept, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Accept{}, err
	}
	return Accept{Password: r.PostForm.Get("password"), Repeat: r.PostForm.Get("repeat"), Code: value(r, "code")}, nil
}

// Password is the form that changes one's password.
type Password struct {
	Current, New, Repeat string
}

// NewPassword reads the password form.
func NewPassword(w http.ResponseWriter, r *http.Request) (Password, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Password{}, err
	}
	return Password{Current: r.PostForm.Get("current"), New: r.PostForm.Get("password"), Repeat: r.PostForm.Get("repeat")}, nil
}

// Code is a form with one code (confirming a new authenticator).
type Code struct {
	Code string
	// Current is the account's password, asked again where a stolen
	// session must not be enough (a new authenticator).
	Current string
}

// NewCode reads it.
func NewCode(w http.ResponseWriter, r *http.Request) (Code, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Code{}, err
	}
	return Code{Code: value(r, "code"), Current: value(r, "current")}, nil
}

// Role is the form that changes an account's role.
type Role struct{ Role string }

// NewRole reads it.
func NewRole(w http.ResponseWriter, r *http.Request) (Role, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Role{}, err
	}
	return Role{Role: value(r, "role")}, nil
}
