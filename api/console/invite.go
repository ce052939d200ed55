package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/account"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// inviteData is the invite page's: whom it invites, and the TOTP secret
// to put into an authenticator app (as text and as an otpauth:// URI;
// no QR code).
type inviteData struct {
	Token, Email string
	Role         Role
	Secret, URI  string
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
	inv, err := h.d.Accounts.InviteByHash(r.Context(), account.HashInviteToken(r.PathValue("token")))
	if errors.Is(err, store.ErrInviteNotFound) {
		h.errorPage(w, r, http.StatusNotFound, "Invite not found",
			"This invite link was used already or has expired (a link works once, for 48 hours). Ask an admin of the console for a new one.")
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
		secret, _, err := account.NewTOTP(inv.Email)
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

func (h *Handler) renderInvite(w http.ResponseWriter, r *http.Request, code int, inv store.Invite, problem string) {
	h.render(w, r, code, "invite", page{Title: "Join the console", Error: problem, Data: inviteData{
		Token: r.PathValue("token"), Email: inv.Email, Role: inv.Role,
		Secret: inv.TOTPSecret, URI: account.TOTPURI(h.newsletterName(r), inv.Email, inv.TOTPSecret),
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
	step, codeOK := account.CheckCode(inv.TOTPSecret, f.Code, h.d.Now())
	var problem string
	switch {
	case f.Password != f.Repeat:
		problem = "The two passwords differ."
	case account.CheckPassword(f.Password, inv.Email, "") != nil:
		problem = "Password: " + account.CheckPassword(f.Password, inv.Email, "").Error() + "."
	case !codeOK:
		problem = "That code is not the app's current one: check that the app shows " + account.Issuer + " (" + inv.Email + ") and type the code it shows now."
	}
	if problem != "" {
		h.renderInvite(w, r, http.StatusBadRequest, inv, problem)
		return
	}
	codes, hashes := account.NewRecoveryCodes()
	a, err := h.d.Accounts.AcceptInvite(r.Context(), inv.Hash, account.HashPassword(f.Password), step, hashes)
	switch {
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
