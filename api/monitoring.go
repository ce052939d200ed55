package api

import (
	"net/http"
	"net/url"
	"strings"
)

// Monitoring guards asynqmon (or any operator UI) mounted at /monitoring/:
// HTTP Basic auth with the admin token as the password (any user name),
// and, because asynqmon has no CSRF protection of its own, a refusal of
// every state-changing request whose Origin (or Referer) is not this
// service: a page elsewhere cannot make a logged-in operator's browser
// delete or run tasks. Without an admin token the route does not exist.
//
// origin is the service's public origin (NEWSLETTER_BASE_URL); the
// request's own host is accepted too, for operators who reach it by
// another name.
func (s *Server) Monitoring(ui http.Handler, origin string) http.Handler {
	return s.deps.Guard.Basic("newsletter monitoring", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !safeMethod(r.Method) && !sameOrigin(r, origin) {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
		w.Header().Set("X-Frame-Options", "DENY")
		ui.ServeHTTP(w, r)
	}))
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sameOrigin checks Origin, or Referer when a browser sent no Origin. A
// request with neither is refused: every browser sends one of them on a
// state-changing request, and scripts can use the admin API instead.
func sameOrigin(r *http.Request, origin string) bool {
	got := r.Header.Get("Origin")
	if got == "" || got == "null" {
		ref, err := url.Parse(r.Header.Get("Referer"))
		if err != nil || ref.Host == "" {
			return false
		}
		got = ref.Scheme + "://" + ref.Host
	}
	allowed := []string{strings.TrimRight(origin, "/"), "http://" + r.Host, "https://" + r.Host}
	for _, a := range allowed {
		if strings.EqualFold(got, a) {
			return true
		}
	}
	return false
}
