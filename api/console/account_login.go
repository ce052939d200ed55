package console

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/accounts"
	"github.com/newsletter/newsletter/store"
)

// A failed sign-in as an address (with an account or without: both are
// held alike) is answered after a hold that doubles with each failure in
// a row, from accountHoldBase up to accountHoldMax: low enough that the
// owner is not kept waiting long, and it slows one client's guesses in a
// row. The hold comes after the check, so it does not bound guesses sent
// in parallel: what does is the client's budget (asked first), the
// hash slots (a few hashes at once for the whole process) and, for the
// code, the count taken before it is checked (store.SecondFactorFailures
// per account and per client in store.SecondFactorWindow).
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
// (a TOTP code, or a recovery code once). The order bounds what a guess
// costs us: a client over its failure budget is answered from the budget
// alone (429, nothing looked up, nothing hashed); the password is
// checked in one of the Hasher's few slots (503 when none comes free
// soon); the code is counted before it is checked, and an account whose
// second factor is paused answers "wait" to whoever has its password.
// The pause is asked after the password, not before: asked first, it
// told anyone who typed an address whether an account had it. A wrong answer counts against the
// address tried, known or not (a hold that grows, never a lock) and the
// client's budget, and is answered with one message that does not say
// which part was wrong.
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
	if tooMany := h.d.Guard.Blocked(r); tooMany != nil {
		h.tooMany(w, r, tooMany, next)
		return
	}
	a, err := h.d.Accounts.AccountByEmail(ctx, email)
	known := err == nil
	if err != nil && !errors.Is(err, store.ErrAccountNotFound) {
		h.storeAway(w, r, err)
		return
	}
	ok, err := h.passwordMatches(ctx, a, known, f.Password)
	if err != nil {
		hashBusy(w)
		h.render(w, r, http.StatusServiceUnavailable, "login", page{Title: "Sign in", Error: hashBusyMessage, Data: h.loginData(next)})
		return
	}
	if !ok {
		h.loginFailed(w, r, email, next)
		return
	}
	how, wait, ok, err := h.secondFactor(ctx, a, h.d.Guard.Client(r), f.Code)
	switch {
	case err != nil || wait > 0:
		h.secondFactorPaused(w, r, wait, err, next)
		return
	case !ok:
		h.loginFailed(w, r, email, next)
		return
	case a.Suspended:
		h.render(w, r, http.StatusForbidden, "login", page{Title: "Sign in", Error: "This account is suspended: ask an admin of the console.", Data: h.loginData(next)})
		return
	}
	if err := h.d.Accounts.SignedInAs(ctx, email); err != nil {
		h.d.Log.Warn("console: the failures of a signed-in address could not be cleared", "err", err)
	}
	h.startAccountSession(w, r, a, how)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// passwordMatches checks pw against the account's hash, or, for an
// address without an account, against a hash nobody has: the same work
// in the same slots, so neither the time nor the 503s tell who has an
// account.
func (h *Handler) passwordMatches(ctx context.Context, a store.Account, known bool, pw string) (bool, error) {
	if !known {
		return false, h.d.Passwords.SpendTime(ctx, pw)
	}
	return h.d.Passwords.Verify(ctx, a.PasswordHash, pw)
}

// hashBusyMessage answers a password that found no free hash slot (or
// whose client left while it waited): with 503 and hashBusy's
// Retry-After, the form again, nothing changed or counted.
const hashBusyMessage = "Too many passwords are being checked at this moment: try again in a few seconds. Nothing was changed."

// hashBusy sets the Retry-After of a 503 for a busy hash.
func hashBusy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(int(accounts.HashRetryAfter.Seconds())))
}

// secondFactorPaused answers a sign-in to an account (or from a client)
// whose second factor is paused: 429 and when to try again. err, a
// store's, answers 503 instead.
func (h *Handler) secondFactorPaused(w http.ResponseWriter, r *http.Request, wait time.Duration, err error, next string) {
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	minutes := int(math.Ceil(wait.Minutes()))
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
	h.render(w, r, http.StatusTooManyRequests, "login", page{Title: "Sign in", Data: h.loginData(next),
		Error: fmt.Sprintf("Too many wrong codes were tried for this account: wait %d minute(s) and try again.", minutes)})
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

// secondFactor counts a try of a's second factor from client, then
// checks code: a recovery code (spent now) or a TOTP code of a step later
// than the last one used (so a code seen over a shoulder or in a proxy's
// log does not sign in again). The try is counted first, atomically, so
// codes sent together are counted together and those past the limit are
// never checked: wait says how long the account (or client) is paused. A
// right code's try is taken back. how says which code, for the audit log.
func (h *Handler) secondFactor(ctx context.Context, a store.Account, client, code string) (how string, wait time.Duration, ok bool, err error) {
	if wait, err = h.d.Accounts.TrySecondFactor(ctx, a.ID, client); err != nil || wait > 0 {
		return "", wait, false, err
	}
	if how, ok, err = h.checkSecondFactor(ctx, a, code); err != nil || !ok {
		return "", 0, false, err
	}
	// The code is spent: a failure to take the try back costs the owner
	// one of their five, never the sign-in.
	if err := h.d.Accounts.SecondFactorPassed(ctx, a.ID, client); err != nil {
		h.d.Log.Warn("console: a right code's try could not be taken back", "err", err)
	}
	return how, 0, true, nil
}

// checkSecondFactor checks code for a: a recovery code or a TOTP code.
func (h *Handler) checkSecondFactor(ctx context.Context, a store.Account, code string) (how string, ok bool, err error) {
	if accounts.LooksLikeRecoveryCode(code) {
		ok, err := h.d.Accounts.UseRecoveryCode(ctx, a.ID, accounts.HashRecoveryCode(code))
		return "with a recovery code", ok, err
	}
	step, ok := accounts.CheckCode(a.TOTPSecret, code, h.d.Now())
	if !ok {
		return "", false, nil
	}
	ok, err = h.d.Accounts.UseTOTPStep(ctx, a.ID, step)
	return "", ok, err
}

// loginFailed counts a failed sign-in against the address tried (an
// account's or not: both are held alike) and the client, holds the
// answer, and answers.
func (h *Handler) loginFailed(w http.ResponseWriter, r *http.Request, email, next string) {
	n, err := h.d.Accounts.SignInFailedAs(r.Context(), email)
	if err != nil {
		n = 1 // held as a first failure: never shorter than that
		h.d.Log.Warn("console: a failed sign-in could not be counted", "err", err)
	}
	if tooMany := h.d.Guard.Failed(r); tooMany != nil {
		h.tooMany(w, r, tooMany, next)
		return
	}
	h.d.Hold(accountHold(n))
	h.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in",
		Error: "The address, the password or the code is wrong. (A code works once: if you just used it, wait for the next.)", Data: h.loginData(next)})
}
