// Package adminauth guards the operator's routes with the admin token
// (NEWSLETTER_ADMIN_TOKEN): the API's /api/* (Bearer), /monitoring and a
// dev mailbox on a real Redis (Basic, for browsers), /debug/pprof/ on
// every role. Without a configured token a guarded route does not exist
// (404), so a forgotten setting fails closed. A client that fails too
// often is answered 429 until its attempts refill: guessing is slow.
package adminauth

import (
	"crypto/subtle"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/ratelimit"
)

// FailuresPerMinute is how many failed attempts a client may make a minute.
const FailuresPerMinute = 10

// Guard checks the admin token.
type Guard struct {
	token     string
	failures  *ratelimit.Limiter
	clientKey func(*http.Request) string
}

// New guards with token; clientKey names a request's client (clientip).
func New(token string, clientKey func(*http.Request) string, now func() time.Time) *Guard {
	return &Guard{token: token, failures: ratelimit.New(FailuresPerMinute, time.Minute, now), clientKey: clientKey}
}

// equal compares a presented token with the configured one in constant
// time.
func equal(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// check answers the request itself and returns false when it may not go
// on: no token configured (404), too many failures (429), or a wrong
// token (401, counted).
func (g *Guard) check(w http.ResponseWriter, r *http.Request, presented string, ok bool, challenge string) bool {
	if g.token == "" {
		http.NotFound(w, r)
		return false
	}
	key := g.clientKey(r)
	if blocked, wait := g.failures.Blocked(key); blocked {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		writeError(w, http.StatusTooManyRequests, "too many failed attempts, try again later")
		return false
	}
	if !ok || !equal(presented, g.token) {
		g.failures.Allow(key)
		w.Header().Set("WWW-Authenticate", challenge)
		writeError(w, http.StatusUnauthorized, "admin token required")
		return false
	}
	return true
}

// Bearer passes requests with "Authorization: Bearer <token>" to h.
func (g *Guard) Bearer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if g.check(w, r, tok, ok, `Bearer realm="newsletter"`) {
			h.ServeHTTP(w, r)
		}
	})
}

// Basic passes requests with HTTP Basic auth whose password is the token
// (any user name) to h: for pages an operator opens in a browser.
func (g *Guard) Basic(realm string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pass, ok := r.BasicAuth()
		if g.check(w, r, pass, ok, `Basic realm="`+realm+`", charset="UTF-8"`) {
			h.ServeHTTP(w, r)
		}
	})
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
