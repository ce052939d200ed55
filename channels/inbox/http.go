package inbox

import (
	"context"
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/internal/address"
)

// Bounds of the reader routes (docs/security.md).
const (
	// callTimeout bounds every route's Redis work but the stream's,
	// which bounds each of its reads the same way.
	callTimeout = 5 * time.Second
	// maxPage is the most messages one list answers.
	maxPage = 50
	// maxBody is the most of a request body read: the routes take none,
	// so this only drains a form's few fields.
	maxBody = 4 << 10
)

// messageID is what a message id may be (MessageID's output).
var messageID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

// Handler serves the reader routes, under the root (channels.Inbound):
//
//	GET  /messages            a page of messages (?cursor=, ?limit=, ?archived=1)
//	GET  /count               {"unread"}
//	POST /messages/{id}/read  also /unread and /archive
//	POST /read-all
//	GET  /stream              text/event-stream (stream.go)
//	GET  /                    the no-JS page (page.go)
//	GET  /inbox.js            the web component (page.go)
//
// Each call but the component's carries the reader's subscriber and hash
// (reader).
func (c *Channel) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /messages", c.timed(c.list))
	mux.HandleFunc("GET /count", c.timed(c.count))
	mux.HandleFunc("POST /messages/{id}/{what}", c.timed(c.mark))
	mux.HandleFunc("POST /read-all", c.timed(c.readAll))
	mux.HandleFunc("GET /stream", c.withReader(c.stream))
	mux.HandleFunc("GET /{$}", c.timed(c.page))
	mux.HandleFunc("GET /inbox.js", c.script)
	return c.cors(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" {
			r.URL.Path = "/" // the root itself: /inbox
		}
		// A HEAD of a GET route would do what the GET does (mark a
		// page seen, hold a stream) and show nothing: only the script,
		// which changes nothing, answers one.
		if r.Method == http.MethodHead && r.URL.Path != "/inbox.js" {
			w.Header().Set("Allow", "GET")
			writeError(w, http.StatusMethodNotAllowed, "HEAD is not answered here: use GET")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		mux.ServeHTTP(w, r)
	}))
}

// readerHandler is a route of one reader's.
type readerHandler func(w http.ResponseWriter, r *http.Request, p channels.Person)

// withReader answers a call whose signature does not hold, and hands
// the reader to h otherwise.
func (c *Channel) withReader(h readerHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, code, msg := c.reader(r)
		if code != 0 {
			writeError(w, code, msg)
			return
		}
		h(w, r, p)
	}
}

// timed is withReader with the call's Redis work bounded by callTimeout.
func (c *Channel) timed(h readerHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
		defer cancel()
		c.withReader(h)(w, r.WithContext(ctx))
	}
}

// credentials are a call's subscriber and hash: the headers, else the
// query.
func credentials(r *http.Request) (subscriber, hash string) {
	subscriber, hash = r.Header.Get("X-Inbox-Subscriber"), r.Header.Get("X-Inbox-Hash")
	if subscriber == "" && hash == "" {
		q := r.URL.Query()
		subscriber, hash = q.Get("subscriber"), q.Get("hash")
	}
	return subscriber, hash
}

// reader is the person a call is signed for: the hash must be the
// HMAC of the subscriber's address (Hash), compared in constant time.
// Someone with no account yet reads an empty inbox (ID 0): a valid
// signature is the product's word, and what exists is not news to it.
// A failure answers its status and message.
func (c *Channel) reader(r *http.Request) (channels.Person, int, string) {
	subscriber, hash := credentials(r)
	if subscriber == "" || hash == "" {
		return channels.Person{}, http.StatusUnauthorized, "want subscriber and hash (query or X-Inbox-Subscriber / X-Inbox-Hash)"
	}
	if len(subscriber) > 320 {
		return channels.Person{}, http.StatusBadRequest, "subscriber: too long for an address"
	}
	norm, err := address.Normalize(subscriber)
	if err != nil {
		return channels.Person{}, http.StatusBadRequest, "subscriber: " + err.Error()
	}
	got, err := hex.DecodeString(hash)
	want, _ := hex.DecodeString(hashOf(c.cfg.Secret, norm)) // our own hex
	if err != nil || !hmac.Equal(got, want) {
		return channels.Person{}, http.StatusForbidden, "the hash does not match the subscriber"
	}
	if c.people == nil {
		return channels.Person{Email: norm}, 0, ""
	}
	p, err := c.people.ByEmail(r.Context(), norm)
	switch {
	case errors.Is(err, channels.ErrNoPerson):
		return channels.Person{Email: norm}, 0, ""
	case err != nil:
		c.log.Warn("inbox: find the reader", "err", err)
		return channels.Person{}, http.StatusServiceUnavailable, "could not read the inbox, please retry"
	}
	return p, 0, ""
}

func (c *Channel) list(w http.ResponseWriter, r *http.Request, p channels.Person) {
	q := r.URL.Query()
	cursor := q.Get("cursor")
	if !validCursor(cursor) {
		writeError(w, http.StatusBadRequest, "cursor: not one this service gave")
		return
	}
	limit := 20
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPage {
			writeError(w, http.StatusBadRequest, "limit: want 1 to "+strconv.Itoa(maxPage))
			return
		}
		limit = n
	}
	pg, err := c.page1(r.Context(), p, cursor, limit, q.Get("archived") == "1")
	if err != nil {
		c.unavailable(w, err)
		return
	}
	writeJSON(w, http.StatusOK, pg)
}

// validCursor tells a cursor a list gave (an order), or none.
func validCursor(cursor string) bool {
	if cursor == "" {
		return true
	}
	n, err := strconv.ParseUint(cursor, 10, 63)
	return err == nil && n > 0
}

// listAnswer is GET /messages's answer.
type listAnswer struct {
	Messages []Message `json:"messages"`
	Next     string    `json:"next"`
	Unread   int64     `json:"unread"`
}

// page1 is a page of p's messages; nobody's (ID 0) is empty.
func (c *Channel) page1(ctx context.Context, p channels.Person, cursor string, limit int, archived bool) (listAnswer, error) {
	a := listAnswer{Messages: []Message{}}
	if p.ID == 0 {
		return a, nil
	}
	pg, err := c.store.list(ctx, p.ID, cursor, limit, archived)
	if err != nil {
		return a, err
	}
	if pg.Messages != nil {
		a.Messages = pg.Messages
	}
	a.Next, a.Unread = pg.Next, pg.Unread
	return a, nil
}

func (c *Channel) count(w http.ResponseWriter, r *http.Request, p channels.Person) {
	var n int64
	if p.ID > 0 {
		var err error
		if n, err = c.store.unread(r.Context(), p.ID); err != nil {
			c.unavailable(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]int64{"unread": n})
}

// marks are the state changes POST /messages/{id}/{what} takes.
var marks = []string{"read", "unread", "archive"}

func (c *Channel) mark(w http.ResponseWriter, r *http.Request, p channels.Person) {
	id, what := r.PathValue("id"), r.PathValue("what")
	if !slices.Contains(marks, what) {
		writeError(w, http.StatusNotFound, "want read, unread or archive")
		return
	}
	if !messageID.MatchString(id) {
		writeError(w, http.StatusNotFound, "no such message")
		return
	}
	if p.ID == 0 {
		writeError(w, http.StatusNotFound, "no such message")
		return
	}
	m, unread, err := c.store.mark(r.Context(), p.ID, id, what)
	if errors.Is(err, errNoMessage) {
		writeError(w, http.StatusNotFound, "no such message")
		return
	}
	if err != nil {
		c.unavailable(w, err)
		return
	}
	c.hub.publish(r.Context(), p.ID)
	if fromPage(r) {
		backToPage(w, r)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": m, "unread": unread})
}

func (c *Channel) readAll(w http.ResponseWriter, r *http.Request, p channels.Person) {
	if p.ID > 0 {
		n, err := c.store.readAll(r.Context(), p.ID)
		if err != nil {
			c.unavailable(w, err)
			return
		}
		if n > 0 {
			c.hub.publish(r.Context(), p.ID)
		}
	}
	if fromPage(r) {
		backToPage(w, r)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"unread": 0})
}

// fromPage tells a form of the no-JS page from an API call: the page's
// forms post a form and take HTML.
func fromPage(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") &&
		strings.Contains(r.Header.Get("Accept"), "text/html")
}

// backToPage answers a form of the no-JS page with the page again.
func backToPage(w http.ResponseWriter, r *http.Request) {
	subscriber, hash := credentials(r)
	q := url.Values{"subscriber": {subscriber}, "hash": {hash}}
	if r.URL.Query().Get("archived") == "1" {
		q.Set("archived", "1")
	}
	base := pageBase(r)
	if base == "" {
		base = "/" // the routes served at the server's root
	}
	http.Redirect(w, r, base+"?"+q.Encode(), http.StatusSeeOther)
}

// pageBase is the page's path as the browser called it: the root the
// service mounted the routes at, which StripPrefix took off, without a
// trailing slash ("/inbox" for /inbox and /inbox/, "" at the server's
// root), so that the page's Base + "/read-all" is a path.
func pageBase(r *http.Request) string {
	p := r.URL.Path
	if raw := r.RequestURI; raw != "" {
		if u, err := url.ParseRequestURI(raw); err == nil {
			p = u.Path
		}
	}
	if i := strings.Index(p, "/messages/"); i >= 0 {
		return p[:i]
	}
	return strings.TrimSuffix(strings.TrimSuffix(p, "/read-all"), "/")
}

func (c *Channel) unavailable(w http.ResponseWriter, err error) {
	c.log.Warn("inbox: redis", "err", err)
	writeError(w, http.StatusServiceUnavailable, "could not read the inbox, please retry")
}

// cors lets the configured origins call the routes from a browser; a
// preflight from any other is refused.
func (c *Channel) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		allowed := origin != "" && slices.Contains(c.cfg.Origins, origin)
		// Every answer varies by Origin: a shared cache must not hand
		// one origin's answer (inbox.js is cacheable) to another.
		w.Header().Add("Vary", "Origin")
		if allowed {
			w.Header().Set("Access-Control-Allow-Origin", origin)
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			if !allowed {
				writeError(w, http.StatusForbidden, "origin not allowed (NEWSLETTER_INBOX_ORIGINS)")
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", "X-Inbox-Subscriber, X-Inbox-Hash, Last-Event-ID, Content-Type")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return // the client went away; nothing to tell it
	}
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
