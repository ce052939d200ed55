package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// prefixSession is the Redis key of a session: + the hex SHA-256 of its
// id. Only the hash is kept, so a copy of Redis signs nobody in.
const prefixSession = "nl:console:session:"

// session is one sign-in: who, with which token (its hash, to see it
// revoked), until when.
type session struct {
	Principal
	TokenHash string
	Expires   time.Time
}

// errNoSession is a cookie that names no live session.
var errNoSession = errors.New("no such session")

type sessions struct {
	rdb redis.UniversalClient
	ttl time.Duration
	now func() time.Time
}

func sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return prefixSession + hex.EncodeToString(sum[:])
}

// start stores a new session for p and returns its id (the cookie's
// value): 32 random bytes.
func (s *sessions) start(ctx context.Context, p Principal, tokenHash string) (string, time.Time, error) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	id := base64.RawURLEncoding.EncodeToString(b)
	exp := s.now().Add(s.ttl)
	key := sessionKey(id)
	_, err := s.rdb.TxPipelined(ctx, func(p2 redis.Pipeliner) error {
		p2.HSet(ctx, key, "n", p.Name, "r", string(p.Role), "t", tokenHash, "e", strconv.FormatInt(exp.UnixMilli(), 10))
		p2.PExpireAt(ctx, key, exp)
		return nil
	})
	return id, exp, err
}

// get is the live session id names: errNoSession when there is none or
// it has expired (by the clock given, not only Redis's).
func (s *sessions) get(ctx context.Context, id string) (session, error) {
	if id == "" || len(id) > 100 {
		return session{}, errNoSession
	}
	v, err := s.rdb.HMGet(ctx, sessionKey(id), "n", "r", "t", "e").Result()
	if err != nil {
		return session{}, err
	}
	str := func(i int) string { x, _ := v[i].(string); return x }
	ms, err := strconv.ParseInt(str(3), 10, 64)
	if err != nil || str(0) == "" {
		return session{}, errNoSession
	}
	ss := session{Principal: Principal{Name: str(0), Role: Role(str(1))}, TokenHash: str(2), Expires: time.UnixMilli(ms)}
	if !s.now().Before(ss.Expires) {
		return session{}, errNoSession
	}
	return ss, nil
}

// end deletes the session id names (logout, a revoked token).
func (s *sessions) end(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	return s.rdb.Del(ctx, sessionKey(id)).Err()
}

// cookieName is the session cookie's name: with the __Host- prefix
// under https, which browsers accept only Secure, host-only and for the
// whole site.
func (h *Handler) cookieName() string {
	if h.secure {
		return "__Host-newsletter-console"
	}
	return "newsletter-console"
}

func (h *Handler) setCookie(w http.ResponseWriter, id string) {
	http.SetCookie(w, h.cookie(id, int(h.cfg.SessionTTL.Seconds())))
}

func (h *Handler) clearCookie(w http.ResponseWriter) { http.SetCookie(w, h.cookie("", -1)) }

// cookie is the session cookie with value, kept maxAge seconds (-1:
// delete it now).
func (h *Handler) cookie(value string, maxAge int) *http.Cookie {
	c := &http.Cookie{Name: h.cookieName(), Value: value, Path: "/", HttpOnly: true, Secure: h.secure,
		SameSite: http.SameSiteStrictMode, MaxAge: maxAge}
	if !h.secure {
		// Without __Host- the cookie may be narrowed to the console.
		c.Path = "/admin/"
	}
	return c
}

func (h *Handler) sessionID(r *http.Request) string {
	c, err := r.Cookie(h.cookieName())
	if err != nil {
		return ""
	}
	return c.Value
}
