// Package adminauth guards the operator's routes with the admin token
// (NEWSLETTER_ADMIN_TOKEN): the API's /api/* (Bearer), /monitoring and a
// dev mailbox on a real Redis (Basic, for browsers), /debug/pprof/ on
// every role. Without a configured token a guarded route does not exist
// (404), so a forgotten setting fails closed.
//
// Guessing is slowed, and the right token is never refused: clients share
// addresses (a NAT, an office, a proxy not listed as trusted), so a limit
// that refused everyone from an address after ten wrong tokens let any
// neighbour lock the operator out. The presented token is compared first;
// the right one always passes. A wrong one is answered 401 while its
// client has failures left in its budget (FailuresPerMinute), and past
// that 429, but only once the budget has a turn for it again, one turn
// after another, at most MaxHold later: however many wrong tokens a client
// sends at once, it learns their fate at the budget's rate. What stops
// guessing is the token's strength (CheckToken); the brake makes an online
// search slower still and keeps it out of the way of the operator.
package adminauth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/newsletter/newsletter/internal/ratelimit"
)

// FailuresPerMinute is how many wrong tokens a client may present a minute
// and be answered at once.
const FailuresPerMinute = 10

// MaxHold is the longest a wrong token's answer is held back: below the
// HTTP server's write timeout (60 s), so the answer still reaches the
// client, and long enough that a client holding many requests open learns
// little more than one waiting its turns.
const MaxHold = 30 * time.Second

// The rule for a configured token: guessing online is slowed, not stopped,
// so the token itself must be hard to guess. Ten different characters rule
// out the repeated and the keyboard-run ones ("aaaaaaaaaaaaaaaa",
// "abababab…"); `openssl rand -hex 16` always passes.
const (
	MinTokenLength   = 16
	MinTokenDistinct = 10
)

// TokenRule says what CheckToken wants, for error messages.
const TokenRule = "at least 16 characters, at least 10 of them different (openssl rand -hex 16 makes one)"

// CheckToken reports whether token is strong enough to configure.
func CheckToken(token string) error {
	distinct := map[rune]bool{}
	for _, r := range token {
		distinct[r] = true
	}
	if utf8.RuneCountInString(token) < MinTokenLength || len(distinct) < MinTokenDistinct {
		return errors.New(TokenRule)
	}
	return nil
}

// NewToken makes up a random token that passes CheckToken (embedded mode,
// where nobody configured one).
func NewToken() string {
	for {
		b := make([]byte, 16)
		_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
		if t := hex.EncodeToString(b); CheckToken(t) == nil {
			return t
		}
	}
}

// Guard checks the admin token.
type Guard struct {
	token     string
	failures  *ratelimit.Limiter
	clientKey func(*http.Request) string
	// hold waits before a wrong token over the budget is answered
	// (time.Sleep; tests move a fake clock instead).
	hold func(time.Duration)
}

// New guards with token; clientKey names a request's client (clientip).
func New(token string, clientKey func(*http.Request) string, now func() time.Time) *Guard {
	return &Guard{
		token: token, failures: ratelimit.New(FailuresPerMinute, time.Minute, now),
		clientKey: clientKey, hold: time.Sleep,
	}
}

// equal compares a presented token with the configured one in constant
// time.
func equal(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// check answers the request itself and returns false when it may not go
// on: no token configured (404), a wrong token within the client's budget
// (401), or past it (429, held back until the budget has a turn for it).
func (g *Guard) check(w http.ResponseWriter, r *http.Request, presented string, ok bool, challenge string) bool {
	if g.token == "" {
		http.NotFound(w, r)
		return false
	}
	// First the comparison: the right token passes whatever this client
	// (or its neighbours) tried before.
	if ok && equal(presented, g.token) {
		return true
	}
	key := g.clientKey(r)
	wait, counted := g.failures.Reserve(key, MaxHold)
	w.Header().Set("WWW-Authenticate", challenge)
	if counted && wait == 0 {
		writeError(w, http.StatusUnauthorized, "admin token required")
		return false
	}
	// Over the budget. The hold ignores the request's context: a request
	// timeout must not answer early, and a client that left costs one
	// goroutine for at most MaxHold.
	g.hold(min(wait, MaxHold))
	_, retry := g.failures.Blocked(key)
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(retry.Seconds())))))
	writeError(w, http.StatusTooManyRequests, "too many wrong admin tokens from this address: try again later")
	return false
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
