package console

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/store"
)

func withPrincipal(ctx context.Context, p Principal) context.Context {
	return adminauth.NewContext(ctx, p)
}

// principalOf is who signed in for r (the zero Principal on the
// sign-in page).
func principalOf(r *http.Request) Principal {
	p, _ := adminauth.FromContext(r.Context())
	return p
}

// require passes r to next when its session is live, its token still
// holds and its role allows need. No session, or an expired or revoked
// one: the sign-in page, which returns here afterwards. A weaker role:
// 403. Redis away: a page that says so.
func (h *Handler) require(need Role, next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := h.sessionID(r)
		ss, err := h.sessions.get(r.Context(), id)
		if errors.Is(err, errNoSession) {
			h.toLogin(w, r)
			return
		}
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		p, live, err := h.live(r.Context(), ss.TokenHash)
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		if !live {
			// Revoked: the session ends now, whatever its expiry said.
			if err := h.sessions.end(r.Context(), id); err != nil {
				h.d.Log.Warn("console: ending a revoked token's session failed", "err", err)
			}
			h.clearCookie(w)
			h.toLogin(w, r)
			return
		}
		if !p.Role.Allows(need) {
			h.errorPage(w, r.WithContext(withPrincipal(r.Context(), p)), http.StatusForbidden, "Not allowed",
				"Your role ("+string(p.Role)+") cannot do this; it needs "+string(need)+". An admin gives you one: a token under Tokens (/admin/tokens) or an account under Accounts (/admin/accounts).")
			return
		}
		next(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// live is who the session's token signs in as now: false once it was
// revoked (or NEWSLETTER_ADMIN_TOKEN changed), so its sessions end with
// their next request.
func (h *Handler) live(ctx context.Context, tokenHash string) (Principal, bool, error) {
	if id, gen, ok := store.AccountOfSessionRef(tokenHash); ok {
		return h.liveAccount(ctx, id, gen)
	}
	if h.d.EnvToken != "" && subtle.ConstantTimeCompare([]byte(tokenHash), []byte(adminauth.HashToken(h.d.EnvToken))) == 1 {
		return adminauth.EnvPrincipal, true, nil
	}
	if h.d.Tokens == nil {
		return Principal{}, false, nil
	}
	p, err := h.d.Tokens.LookupToken(ctx, tokenHash)
	if errors.Is(err, adminauth.ErrUnknownToken) {
		return Principal{}, false, nil
	}
	if err != nil {
		return Principal{}, false, err
	}
	return p, p.Role.Allows(Viewer), nil
}

// liveAccount is who an account's session signs in as now: its address
// and its current role (a role change holds from the next request), and
// false once it is suspended or gone, or its password changed since the
// session began (gen), which ends its sessions.
func (h *Handler) liveAccount(ctx context.Context, id, gen int64) (Principal, bool, error) {
	if h.d.Accounts == nil {
		return Principal{}, false, nil
	}
	a, err := h.d.Accounts.Account(ctx, id)
	if errors.Is(err, store.ErrAccountNotFound) {
		return Principal{}, false, nil
	}
	if err != nil {
		return Principal{}, false, err
	}
	return Principal{Name: a.Email, Role: a.Role}, !a.Suspended && a.SessionGen == gen && a.Role.Allows(Viewer), nil
}

// toLogin sends a request without a live session to the sign-in page: a
// page read returns to where it was, a form or a script's read does not.
func (h *Handler) toLogin(w http.ResponseWriter, r *http.Request) {
	if wantsJSON(r) {
		webjson.Write(w, http.StatusUnauthorized, map[string]string{"error": "sign in again"})
		return
	}
	target := "/admin/login"
	if r.Method == http.MethodGet && r.URL.RequestURI() != "/admin/" {
		target += "?next=" + url.QueryEscape(r.URL.RequestURI())
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// SafeNext is where a sign-in may return to: a path of the console on
// this site, or "/admin/". Anything that could leave the site (a scheme,
// a host, "//evil", a backslash some browsers read as a slash, a path
// that climbs out of /admin/) falls back to "/admin/".
func SafeNext(next string) string {
	const home = "/admin/"
	if !strings.HasPrefix(next, home) || strings.ContainsAny(next, "\\\r\n\t") || strings.HasPrefix(next, "//") {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return home
	}
	clean := path.Clean(u.Path)
	if clean != "/admin" && !strings.HasPrefix(clean, home) {
		return home
	}
	if strings.HasSuffix(u.Path, "/") && clean != "/" {
		clean += "/"
	}
	if clean == "/admin" {
		clean = home
	}
	out := clean
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	return out
}

// wantsJSON tells a script's read (the progress polls) from a page's.
func wantsJSON(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Accept"), "application/json")
}
