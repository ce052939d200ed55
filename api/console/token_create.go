package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
)

// createToken is POST /admin/tokens: a new token, shown once on the
// answer to this post (never stored in clear, never in a URL).
func (h *Handler) createToken(w http.ResponseWriter, r *http.Request) {
	f, err := form.NewToken(w, r)
	if err != nil {
		h.tokens(w, r, http.StatusBadRequest, tokenData{Form: f}, err.Error())
		return
	}
	if h.d.TokenAdmin == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "Not here", "Tokens are made with `newsletter token create` on this deployment.")
		return
	}
	role := Role(f.Role)
	if role != Viewer && role != Editor && role != Admin {
		h.tokens(w, r, http.StatusBadRequest, tokenData{Form: f}, "role: viewer, editor or admin")
		return
	}
	tok, err := h.d.TokenAdmin.CreateToken(r.Context(), f.Name, role)
	if err != nil {
		if bad, ok := err.(interface{ BadInput() bool }); ok && bad.BadInput() {
			h.tokens(w, r, http.StatusBadRequest, tokenData{Form: f}, err.Error())
			return
		}
		h.storeAway(w, r, err)
		return
	}
	h.record(r, "token.create", "token "+f.Name, string(role))
	h.tokens(w, r, http.StatusCreated, tokenData{Form: form.Token{Role: string(Viewer)}, Created: tok}, "")
}
