package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/accounts"
	"github.com/newsletter/newsletter/store"
)

// inviteData is the invite page's: whom it invites, and the TOTP secret
// to put into an authenticator app (as text, an otpauth:// link and a QR
// code).
type inviteData struct {
	Token, Email string
	Role         Role
	App          authenticator
}

// codesData is the page that shows new recovery codes, this once.
type codesData struct {
	Codes []string
	Next  string
}

// invite is the open invite the path's token names, or an answered 404.
func (h *Handler) invite(w http.ResponseWriter, r *http.Request) (store.Invite, bool) {
	// The token is in the path: no page of it may name it to another.
	w.Header().Set("Referrer-Policy", "no-referrer")
	if h.d.Accounts == nil {
		h.notFound(w, r, "page")
		return store.Invite{}, false
	}
	inv, err := h.d.Accounts.InviteByHash(r.Context(), accounts.HashInviteToken(r.PathValue("token")))
	switch {
	case errors.Is(err, store.ErrInviteNotFound):
		h.errorPage(w, r, http.StatusNotFound, "Invite not found",
			"This invite link was used already or has expired (a link works once, for 48 hours). Ask an admin of the console for a new one.")
		return store.Invite{}, false
	case errors.Is(err, store.ErrInviteRevoked):
		h.inviteRevoked(w, r)
		return store.Invite{}, false
	}
	if err != nil {
		h.storeAway(w, r, err)
		return store.Invite{}, false
	}
	return inv, true
}

// showInvite is GET /admin/invite/{token}: the form to choose a password
// and set up the authenticator app. The secret shown is kept with the
// invite, so reloading the page shows the same one.
func (h *Handler) showInvite(w http.ResponseWriter, r *http.Request) {
	inv, ok := h.invite(w, r)
	if !ok {
		return
	}
	if inv.TOTPSecret == "" {
		secret, _, err := accounts.NewTOTP(inv.Email)
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		if inv.TOTPSecret, err = h.d.Accounts.InviteSecret(r.Context(), inv.Hash, secret); err != nil {
			h.storeAway(w, r, err)
			return
		}
	}
	h.renderInvite(w, r, http.StatusOK, inv, "")
}

// inviteRevoked answers a link of an invite an admin revoked: 410, and
// nothing is changed.
func (h *Handler) inviteRevoked(w http.ResponseWriter, r *http.Request) {
	h.errorPage(w, r, http.StatusGone, "Invite revoked",
		"An admin of the console revoked this invite: the link no longer works and nothing was changed. Ask them for a new one if you still need access.")
}

func (h *Handler) renderInvite(w http.ResponseWriter, r *http.Request, code int, inv store.Invite, problem string) {
	h.render(w, r, code, "invite", page{Title: "Join the console", Error: problem, Data: inviteData{
		Token: r.PathValue("token"), Email: inv.Email, Role: inv.Role,
		App: newAuthenticator(h.newsletterName(r), inv.Email, inv.TOTPSecret),
	}})
}

// acceptInvite is POST /admin/invite/{token}: a password that passes the
// rules, typed twice, and the app's current code make the account; the
// invite ends, the person is signed in and sees their recovery codes
// once. Anything wrong: the form again with the reason, nothing changed.
func (h *Handler) acceptInvite(w http.ResponseWriter, r *http.Request) {
	inv, ok := h.invite(w, r)
	if !ok {
		return
	}
	f, err := form.NewAccept(w, r)
	if err != nil {
		h.renderInvite(w, r, form.Status(err), inv, err.Error())
		return
	}
	if inv.TOTPSecret == "" {
		h.renderInvite(w, r, http.StatusBadRequest, inv, "Open the invite link again: the page sets up your authenticator app first.")
		return
	}
	step, codeOK := accounts.CheckCode(inv.TOTPSecret, f.Code, h.d.Now())
	weak := accounts.CheckPassword(f.Password, inv.Email, h.newsletterName(r))
	var problem string
	switch {
	case f.Password != f.Repeat:
		problem = "The two passwords differ."
	case weak != nil:
		problem = "Password: " + weak.Error() + "."
	case !codeOK:
		problem = "That code is not the app's current one: check that the app shows " + accounts.Issuer + " (" + inv.Email + ") and type the code it shows now."
	}
	if problem != "" {
		h.renderInvite(w, r, http.StatusBadRequest, inv, problem)
		return
	}
	// The hash last: only a form that passed every cheap check costs one.
	hash, err := h.d.Passwords.Hash(r.Context(), f.Password)
	if err != nil {
		hashBusy(w)
		h.renderInvite(w, r, http.StatusServiceUnavailable, inv, hashBusyMessage)
		return
	}
	codes, hashes := accounts.NewRecoveryCodes()
	a, err := h.d.Accounts.AcceptInvite(r.Context(), inv.Hash, hash, step, hashes)
	switch {
	case errors.Is(err, store.ErrInviteRevoked):
		h.inviteRevoked(w, r)
		return
	case errors.Is(err, store.ErrInviteNotFound):
		h.errorPage(w, r, http.StatusNotFound, "Invite not found", "This invite link was used already or has expired. Ask an admin of the console for a new one.")
		return
	case errors.Is(err, store.ErrAccountExists):
		h.errorPage(w, r, http.StatusConflict, "Account exists", "This address has an account already: sign in with it.")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	p := Principal{Name: a.Email, Role: a.Role}
	h.audit(r.Context(), p, audit.AccountAccepted, audit.Account(a.Email), string(a.Role)+", invited by "+inv.By)
	if !h.startAccountSession(w, r, a, "") {
		return
	}
	h.render(w, r.WithContext(withPrincipal(r.Context(), p)), http.StatusCreated, "codes", page{Title: "Welcome", Data: codesData{Codes: codes, Next: "/admin/"}})
}
