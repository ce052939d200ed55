package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/adminauth"
)

type tokenData struct {
	Tokens []adminauth.StoredToken
	// Managed: tokens can be made here (TokenAdmin is wired).
	Managed bool
	Form    form.Token
	Roles   []Role
	// Created is a token just made, shown this once.
	Created     string
	CreatedName string
}

// listTokens is GET /admin/tokens.
func (h *Handler) listTokens(w http.ResponseWriter, r *http.Request) {
	h.tokens(w, r, http.StatusOK, tokenData{Form: form.Token{Role: string(Viewer)}}, "")
}

func (h *Handler) tokens(w http.ResponseWriter, r *http.Request, code int, d tokenData, problem string) {
	d.Managed, d.Roles = h.d.TokenAdmin != nil, adminauth.Roles
	if d.Managed {
		list, err := h.d.TokenAdmin.ListTokens(r.Context())
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		d.Tokens = list
	}
	h.render(w, r, code, "tokens", page{Title: "Tokens", Section: "tokens", Error: problem, Data: d})
}
