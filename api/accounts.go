package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/accounts"
	"github.com/newsletter/newsletter/store"
)

// AccountStore keeps the console's accounts and invites (store.Redis).
type AccountStore interface {
	accounts.InviteStore
	accounts.InviteRevoker
	ListAccounts(ctx context.Context) ([]store.Account, error)
}

var inviteFields = fields{"email": textField, "role": textField}

func (s *Server) accountRoutes() {
	if s.deps.Accounts == nil {
		return
	}
	s.mux.Handle("POST /api/accounts/invites", s.Admin(http.HandlerFunc(s.inviteAccount)))
	s.mux.Handle("DELETE /api/accounts/invites/{id}", s.Admin(http.HandlerFunc(s.revokeInvite)))
	s.mux.Handle("GET /api/accounts", s.Admin(http.HandlerFunc(s.listAccounts)))
}

// inviteView is an invite as the API answers it: never its link, which
// is mailed to the person alone. Its id (the token's hash, which cannot
// be turned back into the link) names it to DELETE.
type inviteView struct {
	ID      string         `json:"id"`
	Email   string         `json:"email"`
	Role    adminauth.Role `json:"role"`
	Expires time.Time      `json:"expires"`
}

// inviteAccount handles POST /api/accounts/invites {"email","role"}: 201
// once the invite is stored and its mail queued (the worker sends the
// link); a bad address or role 400, an address with an account 409,
// nothing stored.
func (s *Server) inviteAccount(w http.ResponseWriter, r *http.Request) {
	in := s.readAdminJSON(w, r, inviteFields, false)
	if in == nil {
		return
	}
	by, _ := adminauth.FromContext(r.Context())
	iv := &accounts.Inviter{Store: s.deps.Accounts, Queue: s.deps.Queue, BaseURL: s.cfg.Origin, Now: s.deps.Now}
	inv, _, err := iv.Invite(r.Context(), by, in.get("email"), in.get("role"))
	var bad *accounts.InputError
	switch {
	case errors.As(err, &bad):
		webjson.Write(w, http.StatusBadRequest, errorBody(bad.Error()))
		return
	case errors.Is(err, store.ErrAccountExists), errors.Is(err, store.ErrTooManyAccounts):
		webjson.Write(w, http.StatusConflict, errorBody(err.Error()))
		return
	case err != nil:
		s.deps.Log.Error("accounts: invite", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not store or mail the invite; try again"))
		return
	}
	s.note(r, audit.AccountInvited, audit.Account(inv.Email), string(inv.Role))
	webjson.Write(w, http.StatusCreated, inviteView{ID: inv.Hash, Email: inv.Email, Role: inv.Role, Expires: inv.Expires})
}

// revokeInvite handles DELETE /api/accounts/invites/{id}: 204 once the
// open invite is revoked (its link then answers that it was, and does
// nothing); 404 when no open invite has that id.
func (s *Server) revokeInvite(w http.ResponseWriter, r *http.Request) {
	by, _ := adminauth.FromContext(r.Context())
	email, err := accounts.RevokeInvite(r.Context(), s.deps.Accounts, by, r.PathValue("id"))
	switch {
	case errors.Is(err, store.ErrInviteNotFound):
		webjson.Write(w, http.StatusNotFound, errorBody("no open invite has this id (accepted, expired or revoked already)"))
		return
	case err != nil:
		s.deps.Log.Error("accounts: revoke invite", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("the store is unavailable; try again"))
		return
	}
	s.note(r, audit.AccountInviteRevoked, audit.Account(email), "")
	w.WriteHeader(http.StatusNoContent)
}

// accountView is an account as the API lists it: no secret of it.
type accountView struct {
	Email      string         `json:"email"`
	Role       adminauth.Role `json:"role"`
	Suspended  bool           `json:"suspended"`
	Created    time.Time      `json:"created"`
	LastSignIn *time.Time     `json:"last_signed_in"`
}

// listAccounts handles GET /api/accounts: every account, oldest first.
func (s *Server) listAccounts(w http.ResponseWriter, r *http.Request) {
	list, err := s.deps.Accounts.ListAccounts(r.Context())
	if err != nil {
		s.deps.Log.Error("accounts: list", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("the store is unavailable; try again"))
		return
	}
	out := make([]accountView, 0, len(list))
	for _, a := range list {
		out = append(out, accountView{Email: a.Email, Role: a.Role, Suspended: a.Suspended, Created: a.Created, LastSignIn: timePtr(a.LastSignIn)})
	}
	webjson.Write(w, http.StatusOK, map[string]any{"accounts": out})
}
