package console

import (
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/adminauth"
)

// login is POST /admin/login: an account's address, password and code,
// or a token, in; a session cookie out; then back to where the person was
// going (on this site only).
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	f, err := form.NewLogin(w, r)
	if err != nil {
		h.render(w, r, form.Status(err), "login", page{Title: "Sign in", Error: err.Error(), Data: h.loginData("/admin/")})
		return
	}
	next := SafeNext(f.Next)
	if f.Token == "" && (f.Email != "" || f.Password != "") {
		h.loginAccount(w, r, f, next)
		return
	}
	p, err := h.d.Guard.AuthenticateRequest(r, f.Token)
	var tooMany *adminauth.TooManyError
	switch {
	case errors.Is(err, adminauth.ErrUnknownToken):
		h.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Error: "That token does not sign anyone in.", Data: h.loginData(next)})
		return
	case errors.As(err, &tooMany):
		// The same budget as the API's guard: a wrong token here costs
		// what it costs there.
		h.tooMany(w, r, tooMany, next)
		return
	case errors.Is(err, adminauth.ErrClosed):
		h.render(w, r, http.StatusNotFound, "login", page{Title: "Sign in", Error: "No token is configured: set NEWSLETTER_ADMIN_TOKEN, or make one with `newsletter token create`.", Data: h.loginData(next)})
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	id, _, err := h.sessions.start(r.Context(), p, adminauth.HashToken(f.Token))
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.setCookie(w, id)
	h.audit(r.Context(), p, actionSignedIn, "token:"+p.Name, "")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// tooMany answers a client past the failure budget.
func (h *Handler) tooMany(w http.ResponseWriter, r *http.Request, tooMany *adminauth.TooManyError, next string) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(tooMany.RetryAfter.Seconds())))))
	h.render(w, r, http.StatusTooManyRequests, "login", page{Title: "Sign in", Error: "Too many failed sign-ins from your address: wait a minute and try again.", Data: h.loginData(next)})
}
