// Package adminauth guards the operator's routes with the admin token
// (NEWSLETTER_ADMIN_TOKEN): the API's /api/*, and /debug/pprof/ on every
// role. Without a configured token a guarded route does not exist (404), so
// a forgotten setting fails closed.
package adminauth

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"
)

// Equal compares a presented token with the configured one in constant
// time.
func Equal(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// Bearer passes requests with "Authorization: Bearer <token>" to h and
// answers others 401 (JSON).
func Bearer(token string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token == "" {
			http.NotFound(w, r)
			return
		}
		if !Equal(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="newsletter"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "admin token required"})
			return
		}
		h.ServeHTTP(w, r)
	})
}
