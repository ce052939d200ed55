package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/newsletter/newsletter/internal/account"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// AccountStore keeps the console's accounts and invites (store.Redis).
type AccountStore interface {
	account.InviteStore
	ListAccounts(ctx context.Context) ([]store.Account, error)
}

var inviteFields = fields{"email": textField, "role": textField}

func (s *Server) accountRoutes() {
	if s.deps.Accounts == nil {
		return
	}
	s.mux.Handle("POST /api/accounts/invites", s.Admin(http.HandlerFunc(s.inviteAccount)))
	s.mux.Handle("GET /api/accounts", s.Admin(http.HandlerFunc(s.listAccounts)))
}

// inviteView is an invite as the API answers it: never its link, which
// is mailed to the person alone.
type inviteView struct {
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
	iv := &account.Inviter{Store: s.deps.Accounts, Queue: s.deps.Queue, BaseURL: s.cfg.Origin, Now: s.deps.Now}
	inv, _, err := iv.Invite(r.Context(), by, in.get("email"), in.get("role"))
	var bad *account.InputError
	switch {
	case errors.As(err, &bad):
		WriteJSON(w, http.StatusBadRequest, errorBody(bad.Error()))
		return
	case errors.Is(err, store.ErrAccountExists), errors.Is(err, store.ErrTooManyAccounts):
		WriteJSON(w, http.StatusConflict, errorBody(err.Error()))
		return
	case err != nil:
		s.deps.Log.Error("accounts: invite", "err", err)
		WriteJSON(w, http.StatusServiceUnavailable, errorBody("could not store or mail the invite; try again"))
		return
	}
	s.note(r, audit.AccountInvited, audit.Account(inv.Email), string(inv.Role))
	WriteJSON(w, http.StatusCreated, inviteView{Email: inv.Email, Role: inv.Role, Expires: inv.Expires})
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
		WriteJSON(w, http.StatusServiceUnavailable, errorBody("the store is unavailable; try again"))
		return
	}
	out := make([]accountView, 0, len(list))
	for _, a := range list {
		out = append(out, accountView{Email: a.Email, Role: a.Role, Suspended: a.Suspended, Created: a.Created, LastSignIn: timePtr(a.LastSignIn)})
	}
	WriteJSON(w, http.StatusOK, map[string]any{"accounts": out})
}
