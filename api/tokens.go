package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
)

// hstsMaxAge is how long a browser that saw the service over https
// insists on https for it (a year, as the HSTS preload list asks).
const hstsMaxAge = "max-age=31536000"

// tokenPage wraps the handlers of the pages whose URL or form carries a
// token (confirm, unsubscribe, preferences, GET and POST alike). The
// token is the key to someone's subscription: the page's links and
// subresources must not pass it on in a Referer, and the page, which
// names the person (their address, their topics), is kept by no cache.
//
// Under no-referrer a browser also sends "Origin: null" on the page's
// own form posts (Fetch, "append a request Origin header"): ownPage reads
// Sec-Fetch-Site for those.
func tokenPage(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-store")
		h(w, r)
	}
}

// https tells a service whose public address (NEWSLETTER_BASE_URL) is
// https: its answers carry Strict-Transport-Security, so a browser never
// sends a token over plain http to it again.
func (s *Server) https() bool {
	o := s.cfg.Origin
	return len(o) >= len("https://") && strings.EqualFold(o[:len("https://")], "https://")
}

// addressOf is the address a verified token names: the subscriber with
// its id (every token issued now), or the address inside a link from
// before ids. An id no longer on the list is store.ErrNotFound.
// subscriberOf reads the subscriber a token names: by id, or by the
// address a legacy token carries.
func (s *Server) subscriberOf(ctx context.Context, who token.Subject) (store.Subscriber, error) {
	if who.Legacy() {
		return s.deps.Store.Get(ctx, who.Email)
	}
	return s.deps.Store.GetByID(ctx, who.ID)
}

func (s *Server) addressOf(ctx context.Context, who token.Subject) (string, error) {
	if who.Legacy() {
		return who.Email, nil
	}
	sub, err := s.deps.Store.GetByID(ctx, who.ID)
	if err != nil {
		return "", err
	}
	return sub.Email, nil
}
