package console

import "net/http"

// loginData is the sign-in page's.
type loginData struct {
	Next string
	// Accounts: people sign in with an address, a password and a code
	// here (the form for them is shown first).
	Accounts bool
}

func (h *Handler) loginData(next string) loginData {
	return loginData{Next: next, Accounts: h.d.Accounts != nil}
}

// showLogin is GET /admin/login.
func (h *Handler) showLogin(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "login", page{Title: "Sign in", Data: h.loginData(SafeNext(r.URL.Query().Get("next")))})
}
