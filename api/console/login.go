package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/adminauth"
)

// login is POST /admin/login: a token in, a session cookie out, then
// back to where the person was going (on this site only).
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	f, err := form.NewLogin(w, r)
	if err != nil {
		h.render(w, r, http.StatusBadRequest, "login", page{Title: "Sign in", Error: err.Error(), Data: loginData{Next: "/admin/"}})
		return
	}
	next := SafeNext(f.Next)
	p, err := h.d.Tokens.Authenticate(r.Context(), f.Token)
	if err != nil && !errors.Is(err, ErrWrongToken) {
		h.storeAway(w, r, err)
		return
	}
	if err != nil {
		// The same budget as the API's guard: a wrong token here costs
		// what it costs there.
		code, msg := http.StatusUnauthorized, "That token does not sign anyone in."
		if h.d.Brake != nil {
			if retry, tooMany := h.d.Brake.Refuse(r); tooMany {
				w.Header().Set("Retry-After", adminauth.RetryAfter(retry))
				code, msg = http.StatusTooManyRequests, "Too many wrong tokens from your address: wait a minute and try again."
			}
		}
		h.render(w, r, code, "login", page{Title: "Sign in", Error: msg, Data: loginData{Next: next}})
		return
	}
	id, _, err := h.sessions.start(r.Context(), p, TokenHash(f.Token))
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.setCookie(w, id)
	h.audit(r.Context(), p, "console.login", p.Name, "")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// ErrWrongToken is a token that signs in as nobody (Tokens.Authenticate).
var ErrWrongToken = errors.New("wrong token")
