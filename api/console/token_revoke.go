package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// revokeToken is POST /admin/tokens/{name}/revoke, as `newsletter token
// revoke`: the token signs nobody in from now on, and its sessions end
// with their next request.
func (h *Handler) revokeToken(w http.ResponseWriter, r *http.Request) {
	if err := form.Empty(w, r); err != nil {
		h.errorPage(w, r, http.StatusBadRequest, "Bad form", err.Error())
		return
	}
	if h.d.TokenAdmin == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "Not here", "Tokens are revoked with `newsletter token revoke` on this deployment.")
		return
	}
	name := r.PathValue("name")
	err := h.d.TokenAdmin.RevokeToken(r.Context(), name)
	if errors.Is(err, store.ErrTokenNotFound) {
		h.notFound(w, r, "token")
		return
	}
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.TokenRevoked, "token:"+name, "")
	done(w, r, "/admin/tokens", "revoked")
}
