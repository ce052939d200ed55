package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// createToken is POST /admin/tokens: adminauth.MakeToken, as `newsletter
// token create`; the token is shown once, on the answer to this post
// (never stored in clear, never in a URL).
func (h *Handler) createToken(w http.ResponseWriter, r *http.Request) {
	f, err := form.NewToken(w, r)
	if err != nil {
		h.tokens(w, r, form.Status(err), tokenData{Form: f}, err.Error())
		return
	}
	if h.d.TokenAdmin == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "Not here", "Tokens are made with `newsletter token create` on this deployment.")
		return
	}
	tok, made, err := adminauth.MakeToken(r.Context(), h.d.TokenAdmin, f.Name, f.Role)
	var bad *adminauth.BadTokenRequest
	switch {
	case errors.As(err, &bad):
		h.tokens(w, r, http.StatusBadRequest, tokenData{Form: f}, bad.Error())
		return
	case errors.Is(err, store.ErrTokenNameTaken), errors.Is(err, store.ErrTooManyTokens):
		h.tokens(w, r, http.StatusConflict, tokenData{Form: f}, err.Error())
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.TokenCreated, "token:"+made.Name, string(made.Role))
	h.tokens(w, r, http.StatusCreated, tokenData{Form: form.Token{Role: string(Viewer)}, Created: tok, CreatedName: made.Name}, "")
}
