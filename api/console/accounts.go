package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/accounts"
	"github.com/newsletter/newsletter/store"
)

// accountsData is /admin/accounts': every account, the open invites, the
// invite form.
type accountsData struct {
	Accounts []store.Account
	Invites  []store.Invite
	Form     form.Invite
	Roles    []Role
	Me       string
}

// listAccounts is GET /admin/accounts.
func (h *Handler) listAccounts(w http.ResponseWriter, r *http.Request) {
	h.renderAccounts(w, r, http.StatusOK, form.Invite{Role: string(Viewer)}, "")
}

func (h *Handler) renderAccounts(w http.ResponseWriter, r *http.Request, code int, f form.Invite, problem string) {
	if h.d.Accounts == nil {
		h.notFound(w, r, "page")
		return
	}
	list, err := h.d.Accounts.ListAccounts(r.Context())
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	invites, err := h.d.Accounts.ListInvites(r.Context())
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.render(w, r, code, "accounts", page{Title: "Accounts", Section: "accounts", Error: problem, Data: accountsData{
		Accounts: list, Invites: invites, Form: f, Roles: adminauth.Roles, Me: principalOf(r).Name,
	}})
}

// inviter makes invites whose links start with the service's base URL
// (or, without one, the address this request came to).
func (h *Handler) inviter(r *http.Request) *accounts.Inviter {
	base := h.cfg.BaseURL
	if base == "" {
		base = "http://" + r.Host
	}
	return &accounts.Inviter{Store: h.d.Accounts, Queue: h.d.Queue, BaseURL: base, Now: h.d.Now}
}

// inviteAccount is POST /admin/accounts: an address and a role; the link
// is mailed to the address (never shown here: it is theirs).
func (h *Handler) inviteAccount(w http.ResponseWriter, r *http.Request) {
	f, err := form.NewInvite(w, r)
	if err != nil {
		h.renderAccounts(w, r, form.Status(err), f, err.Error())
		return
	}
	if h.d.Accounts == nil {
		h.notFound(w, r, "page")
		return
	}
	inv, _, err := h.inviter(r).Invite(r.Context(), principalOf(r), f.Email, f.Role)
	var bad *accounts.InputError
	switch {
	case errors.As(err, &bad):
		h.renderAccounts(w, r, http.StatusBadRequest, f, bad.Error()+". Nobody was invited.")
		return
	case errors.Is(err, store.ErrAccountExists), errors.Is(err, store.ErrTooManyAccounts):
		h.renderAccounts(w, r, http.StatusConflict, f, err.Error()+". Nobody was invited.")
		return
	case err != nil && inv.Hash == "":
		h.storeAway(w, r, err)
		return
	case err != nil: // stored, not mailed
		h.d.Log.Error("console: an invite was stored but its mail not queued", "err", err)
		h.renderAccounts(w, r, http.StatusServiceUnavailable, f, "The invite was made but its mail could not be queued: invite again in a moment.")
		return
	}
	h.record(r, audit.AccountInvited, audit.Account(inv.Email), string(inv.Role))
	done(w, r, "/admin/accounts", "invited")
}

// targetAccount is the account the path names, which is not the person's
// own (an admin cannot demote or suspend themselves, so the console
// always keeps the admin who acts), or an answered page.
func (h *Handler) targetAccount(w http.ResponseWriter, r *http.Request) (store.Account, bool) {
	id, ok := pathID(r, "id")
	if !ok || h.d.Accounts == nil {
		h.notFound(w, r, "account")
		return store.Account{}, false
	}
	a, err := h.d.Accounts.Account(r.Context(), id)
	if errors.Is(err, store.ErrAccountNotFound) {
		h.notFound(w, r, "account")
		return store.Account{}, false
	}
	if err != nil {
		h.storeAway(w, r, err)
		return store.Account{}, false
	}
	if a.Email == principalOf(r).Name {
		h.renderAccounts(w, r, http.StatusBadRequest, form.Invite{Role: string(Viewer)}, "You cannot change your own role or suspend yourself: ask another admin.")
		return store.Account{}, false
	}
	return a, true
}

// changeRole is POST /admin/accounts/{id}/role: it holds from the
// account's next request.
func (h *Handler) changeRole(w http.ResponseWriter, r *http.Request) {
	a, ok := h.targetAccount(w, r)
	if !ok {
		return
	}
	f, err := form.NewRole(w, r)
	if err != nil {
		h.renderAccounts(w, r, form.Status(err), form.Invite{Role: string(Viewer)}, err.Error())
		return
	}
	role, err := adminauth.ParseRole(f.Role)
	if err != nil {
		h.renderAccounts(w, r, http.StatusBadRequest, form.Invite{Role: string(Viewer)}, err.Error()+". Nothing was changed.")
		return
	}
	if err := h.d.Accounts.SetRole(r.Context(), a.ID, role); err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.AccountRoleChanged, audit.Account(a.Email), string(a.Role)+" -> "+string(role))
	done(w, r, "/admin/accounts", "role")
}

// suspendAccount is POST /admin/accounts/{id}/suspend (suspend true) and
// …/restore: a suspended account cannot sign in, and its sessions end
// with their next request.
func (h *Handler) suspendAccount(suspend bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, ok := h.targetAccount(w, r)
		if !ok {
			return
		}
		if err := form.Empty(w, r); err != nil {
			h.renderAccounts(w, r, form.Status(err), form.Invite{Role: string(Viewer)}, err.Error())
			return
		}
		if err := h.d.Accounts.SetSuspended(r.Context(), a.ID, suspend); err != nil {
			h.storeAway(w, r, err)
			return
		}
		action, notice := audit.AccountRestored, "restored"
		if suspend {
			action, notice = audit.AccountSuspended, "suspended"
		}
		h.record(r, action, audit.Account(a.Email), "")
		done(w, r, "/admin/accounts", notice)
	}
}

// revokeInvite is POST /admin/accounts/invites/{id}/revoke (id: the
// invite's hash, as the list shows it): the link stops working at once
// and says it was revoked.
func (h *Handler) revokeInvite(w http.ResponseWriter, r *http.Request) {
	if err := form.Empty(w, r); err != nil {
		h.renderAccounts(w, r, form.Status(err), form.Invite{Role: string(Viewer)}, err.Error())
		return
	}
	if h.d.Accounts == nil {
		h.notFound(w, r, "page")
		return
	}
	email, err := accounts.RevokeInvite(r.Context(), h.d.Accounts, principalOf(r), r.PathValue("id"))
	switch {
	case errors.Is(err, store.ErrInviteNotFound):
		h.renderAccounts(w, r, http.StatusNotFound, form.Invite{Role: string(Viewer)}, "That invite is no longer open (accepted, expired or revoked already). Nothing was changed.")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.AccountInviteRevoked, audit.Account(email), "")
	done(w, r, "/admin/accounts", "invite-revoked")
}
