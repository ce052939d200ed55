package console

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/account"
	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// A failed sign-in of an account is answered after a hold that doubles
// with each failure in a row, from accountHoldBase up to accountHoldMax:
// low enough that the account's owner, who types the right password and
// code, is never kept out (the right ones pass at once, whatever came
// before), high enough that guessing one account from many addresses
// runs at a few tries a second at most, with a TOTP code to guess too.
const (
	accountHoldBase = 250 * time.Millisecond
	accountHoldMax  = 4 * time.Second
)

// accountHold is the hold after the n-th failure in a row.
func accountHold(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return min(accountHoldBase<<min(n-1, 16), accountHoldMax)
}

// loginAccount signs a person in with their address, password and code
// (a TOTP code, or a recovery code once). The right three always pass at
// once: the password is compared first, then the code. Anything wrong
// counts against the account (a hold that grows, never a lock) and the
// client's budget (the tokens' budget: 401, then 429), and is answered
// with one message that does not say which part was wrong.
func (h *Handler) loginAccount(w http.ResponseWriter, r *http.Request, f form.Login, next string) {
	ctx := r.Context()
	if h.d.Accounts == nil {
		h.render(w, r, http.StatusNotFound, "login", page{Title: "Sign in", Error: "Accounts are not kept on this deployment: sign in with a token.", Data: h.loginData(next)})
		return
	}
	email, err := address.Normalize(f.Email)
	if err != nil {
		h.render(w, r, http.StatusBadRequest, "login", page{Title: "Sign in", Error: "That is not an e-mail address: " + err.Error(), Data: h.loginData(next)})
		return
	}
	a, err := h.d.Accounts.AccountByEmail(ctx, email)
	switch {
	case errors.Is(err, store.ErrAccountNotFound):
		// As long as a wrong password takes, so the answer's time does
		// not tell who has an account.
		account.SpendHashTime(f.Password)
		h.loginFailed(w, r, nil, next)
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	if !account.VerifyPassword(a.PasswordHash, f.Password) {
		h.loginFailed(w, r, &a, next)
		return
	}
	how, ok, err := h.secondFactor(ctx, a, f.Code)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	if !ok {
		h.loginFailed(w, r, &a, next)
		return
	}
	if a.Suspended {
		h.render(w, r, http.StatusForbidden, "login", page{Title: "Sign in", Error: "This account is suspended: ask an admin of the console.", Data: h.loginData(next)})
		return
	}
	h.startAccountSession(w, r, a, how)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// startAccountSession signs a in on this browser and records it.
func (h *Handler) startAccountSession(w http.ResponseWriter, r *http.Request, a store.Account, how string) bool {
	p := Principal{Name: a.Email, Role: a.Role}
	if err := h.d.Accounts.SignedIn(r.Context(), a.ID); err != nil {
		h.storeAway(w, r, err)
		return false
	}
	id, _, err := h.sessions.start(r.Context(), p, store.AccountSessionRef(a))
	if err != nil {
		h.storeAway(w, r, err)
		return false
	}
	h.setCookie(w, id)
	h.audit(r.Context(), p, actionSignedIn, audit.Account(a.Email), how)
	return true
}

// secondFactor checks code for a: a recovery code (spent now) or a TOTP
// code of a step later than the last one used (so a code seen over a
// shoulder or in a proxy's log does not sign in again). how says which,
// for the audit log.
func (h *Handler) secondFactor(ctx context.Context, a store.Account, code string) (how string, ok bool, err error) {
	if account.LooksLikeRecoveryCode(code) {
		ok, err := h.d.Accounts.UseRecoveryCode(ctx, a.ID, account.HashRecoveryCode(code))
		return "with a recovery code", ok, err
	}
	step, ok := account.CheckCode(a.TOTPSecret, code, h.d.Now())
	if !ok {
		return "", false, nil
	}
	ok, err = h.d.Accounts.UseTOTPStep(ctx, a.ID, step)
	return "", ok, err
}

// loginFailed counts a failed sign-in against the account (when there is
// one) and the client, holds the answer, and answers.
func (h *Handler) loginFailed(w http.ResponseWriter, r *http.Request, a *store.Account, next string) {
	// An unknown address is held as a first failure is: its answer comes
	// no sooner than a real account's wrong password would.
	n := 1
	if a != nil {
		var err error
		if n, err = h.d.Accounts.SignInFailed(r.Context(), a.ID); err != nil {
			h.d.Log.Warn("console: a failed sign-in could not be counted", "err", err)
		}
	}
	if tooMany := h.d.Guard.Failed(r); tooMany != nil {
		h.tooMany(w, r, tooMany, next)
		return
	}
	h.d.Hold(accountHold(n))
	h.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in",
		Error: "The address, the password or the code is wrong. (A code works once: if you just used it, wait for the next.)", Data: h.loginData(next)})
}
