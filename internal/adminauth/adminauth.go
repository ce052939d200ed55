// Package adminauth guards the operator's and the publisher's routes with
// tokens and roles. A token is NEWSLETTER_ADMIN_TOKEN (always an admin,
// EnvPrincipal) or one made by `newsletter token create`, of which the
// store keeps only the SHA-256 hash, a name, a role and when it was made
// (TokenStore). Roles are nested (Viewer, Editor, Admin): Require(role, h)
// lets a token through whose role allows the route's, answers 403 to a
// known token with too low a role, and hands h the Principal in the
// request's context (FromContext) for the audit log. The API's /api/*
// take Bearer; /monitoring (asynqmon) and a dev mailbox on a real Redis
// take Basic, admins only; /debug/pprof/ on every role takes Bearer,
// admins only. A guard with neither a configured token nor a store is
// closed: its routes do not exist (404), so a forgotten setting fails
// closed.
//
// A stored token is looked up on every request, never cached, so a
// revocation holds from the next request on. When the store cannot
// answer, a stored token is neither right nor wrong: 503, never 401.
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
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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

// Guard checks the tokens: NEWSLETTER_ADMIN_TOKEN and, when it was given
// a TokenStore, the stored ones.
type Guard struct {
	token     string
	tokens    TokenStore
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

// WithTokens makes g accept the tokens of ts beside the configured one
// (set before g serves; returns g). A guard with a token store is open
// even without NEWSLETTER_ADMIN_TOKEN: an operator may hand out stored
// tokens only.
func (g *Guard) WithTokens(ts TokenStore) *Guard {
	g.tokens = ts
	return g
}

// WithHold makes g wait with hold instead of time.Sleep before answering
// a failure over the budget (set before g serves; returns g): tests of
// the routes that share a guard move a fake clock instead of waiting.
func (g *Guard) WithHold(hold func(time.Duration)) *Guard {
	g.hold = hold
	return g
}

// closed: no token could ever pass, so guarded routes do not exist.
func (g *Guard) closed() bool { return g.token == "" && g.tokens == nil }

// equal compares a presented token with the configured one in constant
// time.
func equal(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// maxPresented bounds what is hashed and looked up: stored tokens are
// NewToken's 32 characters; anything far longer is wrong without asking.
const maxPresented = 256

// Authenticate names the holder of token: EnvPrincipal for the configured
// token (compared in constant time), or the stored token whose SHA-256
// hash (HashToken) matches. It is ErrUnknownToken for any other, and an
// error wrapping ErrTokenStore when the store could not answer, which must
// never be taken for a wrong token (a Redis fault is not a lock-out). It
// does not touch the failure budget: AuthenticateRequest does.
func (g *Guard) Authenticate(ctx context.Context, token string) (Principal, error) {
	if g.token != "" && equal(token, g.token) {
		return EnvPrincipal, nil
	}
	if g.tokens == nil || token == "" || len(token) > maxPresented {
		return Principal{}, ErrUnknownToken
	}
	p, err := g.tokens.LookupToken(ctx, HashToken(token))
	switch {
	case errors.Is(err, ErrUnknownToken):
		return Principal{}, ErrUnknownToken
	case err != nil:
		return Principal{}, fmt.Errorf("%w: %w", ErrTokenStore, err)
	case p.Role.Allows(Viewer):
		return p, nil
	default: // a record with a role this version does not know grants nothing
		return Principal{}, ErrUnknownToken
	}
}

// ErrClosed: no token is configured and no store given; the guarded
// routes do not exist (404).
var ErrClosed = errors.New("no admin token configured")

// TooManyError is a wrong token from a client past its failure budget,
// answered after its hold: try again after RetryAfter.
type TooManyError struct{ RetryAfter time.Duration }

func (e *TooManyError) Error() string {
	return "too many wrong admin tokens from this address: try again later"
}

// RetryAfterHeader is RetryAfter as a Retry-After header's value: whole
// seconds, at least 1.
func (e *TooManyError) RetryAfterHeader() string {
	return strconv.Itoa(max(1, int(math.Ceil(e.RetryAfter.Seconds()))))
}

// AuthenticateRequest is Authenticate for a request of r's client, with
// the failure budget: the right token always passes at once; a wrong one
// is ErrUnknownToken while the client has failures left, and past that,
// after a hold until the budget has a turn for it, a *TooManyError. A
// store failure costs a turn too (or a guesser could try the configured
// token freely while Redis is away) but is still answered as the store's
// error, after the hold if over the budget: a holder of a stored token is
// never told it is wrong. ErrClosed when g is closed. The console's login
// uses it as the API's guard does.
func (g *Guard) AuthenticateRequest(r *http.Request, token string) (Principal, error) {
	if g.closed() {
		return Principal{}, ErrClosed
	}
	// First the comparison: the right token passes whatever this client
	// (or its neighbours) tried before.
	p, err := g.Authenticate(r.Context(), token)
	if err == nil {
		return p, nil
	}
	tooMany := g.Failed(r)
	if tooMany == nil || errors.Is(err, ErrTokenStore) {
		return Principal{}, err
	}
	return Principal{}, tooMany
}

// Failed counts a failed proof of a secret by r's client against the
// failure budget that wrong tokens use: nil while the client has failures
// left, and past that, after a hold until the budget has a turn for it, a
// *TooManyError (429). Other secrets than tokens use it too (the
// provider webhooks' passwords and signatures), so a guesser cannot
// multiply its rate by switching targets. Call it only after the secret
// was found wrong: the right one must never wait.
func (g *Guard) Failed(r *http.Request) *TooManyError {
	key := g.clientKey(r)
	wait, counted := g.failures.Reserve(key, MaxHold)
	if counted && wait == 0 {
		return nil
	}
	// Over the budget. The hold ignores the request's context: a request
	// timeout must not answer early, and a client that left costs one
	// goroutine for at most MaxHold.
	g.hold(min(wait, MaxHold))
	_, retry := g.failures.Blocked(key)
	return &TooManyError{RetryAfter: retry}
}

// Blocked reports, without counting anything, whether r's client has
// used its failure budget up: a *TooManyError (its Retry-After when a
// turn comes back), or nil. Work that is costly for a wrong secret (a
// password's 19 MiB hash) asks it first, so a client over its budget
// costs nothing more than this answer.
func (g *Guard) Blocked(r *http.Request) *TooManyError {
	if over, retry := g.failures.Blocked(g.clientKey(r)); over {
		return &TooManyError{RetryAfter: retry}
	}
	return nil
}

// Client names r's client as the failure budget does (its address, or
// the forwarded one from a trusted proxy): for other counts kept per
// client.
func (g *Guard) Client(r *http.Request) string { return g.clientKey(r) }

// guard authenticates r with the presented token (ok: one was presented
// at all), answers a refusal itself and returns false, or returns the
// principal.
func (g *Guard) guard(w http.ResponseWriter, r *http.Request, presented string, ok bool, challenge string) (Principal, bool) {
	if !ok {
		presented = ""
	}
	p, err := g.AuthenticateRequest(r, presented)
	var tooMany *TooManyError
	switch {
	case err == nil:
		return p, true
	case errors.Is(err, ErrClosed):
		http.NotFound(w, r)
	case errors.Is(err, ErrTokenStore):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "the token store is not answering; try again shortly")
	case errors.As(err, &tooMany):
		w.Header().Set("WWW-Authenticate", challenge)
		w.Header().Set("Retry-After", tooMany.RetryAfterHeader())
		writeError(w, http.StatusTooManyRequests, tooMany.Error())
	default:
		w.Header().Set("WWW-Authenticate", challenge)
		writeError(w, http.StatusUnauthorized, "admin token required")
	}
	return Principal{}, false
}

// Require passes requests with "Authorization: Bearer <token>" whose
// holder's role allows need to h, with the Principal in the request's
// context (FromContext). No or a wrong token: 401, then 429 as the
// package says; a known token whose role is too low: 403; the token
// store away: 503.
func (g *Guard) Require(need Role, h http.Handler) http.Handler {
	return &Guarded{need: need, serve: func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if p, ok := g.guard(w, r, tok, ok, `Bearer realm="newsletter"`); ok && g.allowed(w, p, need) {
			h.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
		}
	}}
}

// Guarded is a handler behind a guard (what Require and Basic return). It
// tells the role it needs, so a route table can list every guarded route
// with its role and a test can walk them.
type Guarded struct {
	need  Role
	serve http.HandlerFunc
}

// ServeHTTP implements http.Handler.
func (gh *Guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) { gh.serve(w, r) }

// Need is the role the route requires.
func (gh *Guarded) Need() Role { return gh.need }

// allowed answers 403 when p's role does not allow need.
func (g *Guard) allowed(w http.ResponseWriter, p Principal, need Role) bool {
	if p.Role.Allows(need) {
		return true
	}
	writeError(w, http.StatusForbidden, fmt.Sprintf("this needs the %s role; token %q has %s", need, p.Name, p.Role))
	return false
}

// Bearer is Require(Admin, h).
func (g *Guard) Bearer(h http.Handler) http.Handler { return g.Require(Admin, h) }

// Basic passes requests with HTTP Basic auth whose password is an admin's
// token (any user name) to h: for pages an operator opens in a browser
// (asynqmon, the dev mailbox), which are admin-only.
func (g *Guard) Basic(realm string, h http.Handler) http.Handler {
	return &Guarded{need: Admin, serve: func(w http.ResponseWriter, r *http.Request) {
		_, pass, ok := r.BasicAuth()
		if p, ok := g.guard(w, r, pass, ok, `Basic realm="`+realm+`", charset="UTF-8"`); ok && g.allowed(w, p, Admin) {
			h.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
		}
	}}
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
