package console

import "net/http"

// loginData is the sign-in page's.
type loginData struct {
	Next string
}

// showLogin is GET /admin/login.
func (h *Handler) showLogin(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "login", page{Title: "Sign in", Data: loginData{Next: SafeNext(r.URL.Query().Get("next"))}})
}
