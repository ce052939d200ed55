package console

import (
	"net/http"
	"strings"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
)

// logout is POST /admin/logout: the session is deleted in Redis, so the
// cookie is worth nothing from now on, wherever a copy of it is.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if err := form.Empty(w, r); err != nil {
		h.errorPage(w, r, form.Status(err), "Bad form", err.Error())
		return
	}
	if err := h.sessions.end(r.Context(), h.sessionID(r)); err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.clearCookie(w)
	h.record(r, actionSignedOut, sessionTarget(principalOf(r)), "")
	done(w, r, "/admin/login", "signed-out")
}

// sessionTarget names who a session was in the audit log: an account by
// its address (token names cannot hold an '@'), else a token.
func sessionTarget(p Principal) string {
	if strings.Contains(p.Name, "@") {
		return audit.Account(p.Name)
	}
	return "token:" + p.Name
}
