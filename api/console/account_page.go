package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/accounts"
	"github.com/newsletter/newsletter/store"
)

// accountData is /admin/account's: the account, how many recovery codes
// are left, a new authenticator waiting for its code (Pending), and new recovery
// codes shown this once.
type accountData struct {
	Account   store.Account
	CodesLeft int
	Pending   authenticator
	NewCodes  []string
	MinLength int
}

// myAccount is the account of the person signed in, or an answered page:
// a token's session has no account.
func (h *Handler) myAccount(w http.ResponseWriter, r *http.Request) (store.Account, bool) {
	if h.d.Accounts == nil {
		h.notFound(w, r, "page")
		return store.Account{}, false
	}
	a, err := h.d.Accounts.AccountByEmail(r.Context(), principalOf(r).Name)
	if errors.Is(err, store.ErrAccountNotFound) {
		h.errorPage(w, r, http.StatusNotFound, "No account",
			"You signed in with a token, which has no password or authenticator. Ask an admin to invite you to an account.")
		return store.Account{}, false
	}
	if err != nil {
		h.storeAway(w, r, err)
		return store.Account{}, false
	}
	return a, true
}

// showAccount is GET /admin/account.
func (h *Handler) showAccount(w http.ResponseWriter, r *http.Request) {
	if a, ok := h.myAccount(w, r); ok {
		h.renderAccount(w, r, http.StatusOK, a, nil, "")
	}
}

func (h *Handler) renderAccount(w http.ResponseWriter, r *http.Request, code int, a store.Account, newCodes []string, problem string) {
	left, err := h.d.Accounts.RecoveryCodesLeft(r.Context(), a.ID)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	d := accountData{Account: a, CodesLeft: left, NewCodes: newCodes, MinLength: accounts.MinPassword}
	if a.PendingTOTP != "" {
		d.Pending = newAuthenticator(h.newsletterName(r), a.Email, a.PendingTOTP)
	}
	h.render(w, r, code, "account", page{Title: "Your account", Section: "account", Error: problem, Data: d})
}

// changePassword is POST /admin/account/password: the current password,
// and a new one that passes the rules, typed twice. Every other session
// of the account ends; this browser stays signed in.
func (h *Handler) changePassword(w http.ResponseWriter, r *http.Request) {
	a, ok := h.myAccount(w, r)
	if !ok {
		return
	}
	f, err := form.NewPassword(w, r)
	if err != nil {
		h.renderAccount(w, r, form.Status(err), a, nil, err.Error())
		return
	}
	// A stolen session must not turn into a stolen password.
	if !h.currentPasswordRight(w, r, a, f.Current, "The current password is wrong. Nothing was changed.") {
		return
	}
	hash, problem, err := h.newPasswordHash(r, a, f.New, f.Repeat)
	switch {
	case err != nil:
		hashBusy(w)
		h.renderAccount(w, r, http.StatusServiceUnavailable, a, nil, hashBusyMessage)
		return
	case problem != "":
		h.renderAccount(w, r, http.StatusBadRequest, a, nil, problem+" Nothing was changed.")
		return
	}
	if err := h.d.Accounts.SetPassword(r.Context(), a.ID, hash); err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.AccountPasswordChanged, audit.Account(a.Email), "")
	// Every session of the account ended with the change (a stolen
	// session does not outlive the password): this one starts anew.
	if err := h.sessions.end(r.Context(), h.sessionID(r)); err != nil {
		h.d.Log.Warn("console: ending the session of a changed password failed", "err", err)
	}
	a, ok = h.myAccount(w, r)
	if !ok || !h.startAccountSession(w, r, a, "after a password change") {
		return
	}
	done(w, r, "/admin/account", "password")
}

// newPasswordHash checks a new password for a (typed twice, the rules,
// not the current one) and hashes it: the hash, or the problem to show,
// or ErrHashBusy from a hash.
func (h *Handler) newPasswordHash(r *http.Request, a store.Account, pw, repeat string) (hash, problem string, err error) {
	if pw != repeat {
		return "", "The two new passwords differ.", nil
	}
	if err := accounts.CheckPassword(pw, a.Email, h.newsletterName(r)); err != nil {
		return "", "New password: " + err.Error() + ".", nil
	}
	same, err := h.d.Passwords.Verify(r.Context(), a.PasswordHash, pw)
	if err != nil {
		return "", "", err
	}
	if same {
		return "", "New password: the new password is your current one; choose another.", nil
	}
	hash, err = h.d.Passwords.Hash(r.Context(), pw)
	return hash, "", err
}

// newTOTP is POST /admin/account/totp: a new authenticator secret, kept
// aside until a code of it confirms it; the old one signs in until then.
func (h *Handler) newTOTP(w http.ResponseWriter, r *http.Request) {
	a, ok := h.myAccount(w, r)
	if !ok {
		return
	}
	if err := form.Empty(w, r); err != nil {
		h.renderAccount(w, r, form.Status(err), a, nil, err.Error())
		return
	}
	secret, _, err := accounts.NewTOTP(a.Email)
	if err == nil {
		err = h.d.Accounts.SetPendingTOTP(r.Context(), a.ID, secret)
	}
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/account#totp", http.StatusSeeOther)
}

// confirmTOTP is POST /admin/account/totp/confirm: the current password
// and the new app's current code make its secret the account's, replace
// the recovery codes (shown this once) and end every other session.
func (h *Handler) confirmTOTP(w http.ResponseWriter, r *http.Request) {
	a, ok := h.myAccount(w, r)
	if !ok {
		return
	}
	f, err := form.NewCode(w, r)
	if err != nil {
		h.renderAccount(w, r, form.Status(err), a, nil, err.Error())
		return
	}
	if a.PendingTOTP == "" {
		h.renderAccount(w, r, http.StatusBadRequest, a, nil, "No new authenticator is waiting: press Set up a new authenticator first.")
		return
	}
	// A stolen session must not turn into a second factor of the thief's
	// (and new recovery codes).
	if !h.currentPasswordRight(w, r, a, f.Current, "The current password is wrong. Nothing was changed: your old app still signs you in.") {
		return
	}
	step, codeOK := accounts.CheckCode(a.PendingTOTP, f.Code, h.d.Now())
	if !codeOK {
		h.renderAccount(w, r, http.StatusBadRequest, a, nil, "That code is not the new app's current one. Nothing was changed: your old app still signs you in.")
		return
	}
	codes, hashes := accounts.NewRecoveryCodes()
	changed, err := h.d.Accounts.ConfirmTOTP(r.Context(), a.ID, a.PendingTOTP, step, hashes)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	if !changed {
		h.renderAccount(w, r, http.StatusConflict, a, nil, "Another page set up a different authenticator meanwhile. Nothing was changed: open this page again.")
		return
	}
	h.record(r, audit.AccountTOTPEnabled, audit.Account(a.Email), "new authenticator and recovery codes")
	// Every session of the account ended with the change, as with a new
	// password: this one starts anew.
	if err := h.sessions.end(r.Context(), h.sessionID(r)); err != nil {
		h.d.Log.Warn("console: ending the session of a changed authenticator failed", "err", err)
	}
	a, ok = h.myAccount(w, r)
	if ok && h.startAccountSession(w, r, a, "after a new authenticator") {
		h.renderAccount(w, r, http.StatusOK, a, codes, "")
	}
}

// currentPasswordRight checks the password typed to confirm a change of
// the account's own (a new password, a new authenticator), and answers
// the page itself when it is not right. A wrong one costs like a sign-in:
// the client's budget is asked before the hash, as there, and the failure
// counts against the client and the account.
func (h *Handler) currentPasswordRight(w http.ResponseWriter, r *http.Request, a store.Account, typed, wrong string) bool {
	if tooMany := h.d.Guard.Blocked(r); tooMany != nil {
		w.Header().Set("Retry-After", tooMany.RetryAfterHeader())
		h.renderAccount(w, r, http.StatusTooManyRequests, a, nil, tooMany.Error())
		return false
	}
	current, err := h.d.Passwords.Verify(r.Context(), a.PasswordHash, typed)
	if err != nil {
		hashBusy(w)
		h.renderAccount(w, r, http.StatusServiceUnavailable, a, nil, hashBusyMessage)
		return false
	}
	if current {
		return true
	}
	if _, err := h.d.Accounts.SignInFailedAs(r.Context(), a.Email); err != nil {
		h.d.Log.Warn("console: a wrong password could not be counted", "err", err)
	}
	if tooMany := h.d.Guard.Failed(r); tooMany != nil {
		h.renderAccount(w, r, http.StatusTooManyRequests, a, nil, tooMany.Error())
		return false
	}
	h.renderAccount(w, r, http.StatusBadRequest, a, nil, wrong)
	return false
}
