package engage

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Mode is NEWSLETTER_ENGAGEMENT.
type Mode string

// The modes.
const (
	// Aggregate counts clicks per link and distinct readers, keeping no
	// one's history (the default).
	Aggregate Mode = "aggregate"
	// PerPerson also keeps each person's clicks for a stated number of
	// days, in their personal data.
	PerPerson Mode = "per-person"
	// Off leaves links as they are written; links in mails sent before
	// still redirect, uncounted.
	Off Mode = "off"
)

// LinkStore gives an issue's stored link targets.
type LinkStore interface {
	IssueLinks(ctx context.Context, issueID int64) ([]string, error)
}

// Handler serves GET /r/{token} and GET /o/{token}.
type Handler struct {
	Keys     *Keys
	Links    LinkStore
	Recorder *Recorder
	Classify *Classifier
	Mode     Mode
	// Opens counts the pixel's loads (NEWSLETTER_OPENS=on).
	Opens   bool
	Metrics *Metrics
	Log     *slog.Logger
	Now     func() time.Time

	cache linkCache
}

// Register adds the routes to mux.
func (h *Handler) Register(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /r/{token}", http.HandlerFunc(h.Redirect))
	mux.Handle("GET /o/{token}", http.HandlerFunc(h.Open))
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// badLink is the page of a link we did not sign: no redirect, ever.
func (h *Handler) badLink(w http.ResponseWriter, kind string) {
	h.Metrics.Events.WithLabelValues(kind, "refused").Inc()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte("This link is not valid. Open the mail it came in again, or the page it names directly.\n")) // a failed write is the client gone
}

// Redirect counts a click and sends the reader to the link's target.
func (h *Handler) Redirect(w http.ResponseWriter, r *http.Request) {
	c, err := h.Keys.Parse(r.PathValue("token"))
	if err != nil {
		h.testRedirect(w, r)
		return
	}
	if c.What != Link && c.What != Honeypot {
		h.badLink(w, "click")
		return
	}
	now := h.now()
	reader := h.Keys.ReaderHash(c.Reader)
	// The token names the reader: it must not travel on in a Referer to
	// the target, nor stay in a cache.
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	if c.What == Honeypot {
		// No person sees this link: whatever followed it is a machine,
		// and so are its other clicks of this mail for a while.
		// It is no link of the issue's: counted in the metric only.
		h.Classify.Honeypot(c.Issue, reader, now)
		h.Metrics.Events.WithLabelValues("click", "honeypot").Inc()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	target, err := h.target(r.Context(), c.Issue, c.Index)
	if errors.Is(err, errNoLink) {
		h.badLink(w, "click")
		return
	}
	if err != nil {
		h.Log.Warn("engagement: the issue's links could not be read", "issue", c.Issue, "err", err)
		w.Header().Set("Retry-After", "5")
		http.Error(w, "This link cannot be followed just now; try again in a moment.", http.StatusServiceUnavailable)
		return
	}
	if h.Mode != Off {
		e := Event{Issue: c.Issue, Index: c.Index, ReaderHash: reader, At: now, Sent: c.Sent,
			Machine: h.Classify.Click(r, c, reader, now)}
		if h.Mode == PerPerson {
			e.Reader = c.Reader
		}
		h.Recorder.Record(e)
	}
	http.Redirect(w, r, target, http.StatusFound)
}

// testRedirect sends a test send's link to its target, counting nothing
// (Keys.TestLink); any other token is refused.
func (h *Handler) testRedirect(w http.ResponseWriter, r *http.Request) {
	target := r.URL.Query().Get("u")
	if _, err := h.Keys.ParseTest(r.PathValue("token"), target, h.now()); err != nil {
		h.badLink(w, "click")
		return
	}
	h.Metrics.Events.WithLabelValues("click", "test").Inc()
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, target, http.StatusFound)
}

// pixel is a transparent 1×1 GIF.
var pixel = []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")

// Open counts an open and answers the pixel.
func (h *Handler) Open(w http.ResponseWriter, r *http.Request) {
	c, err := h.Keys.Parse(r.PathValue("token"))
	if err != nil || c.What != Pixel {
		h.badLink(w, "open")
		return
	}
	if h.Opens && h.Mode != Off {
		now := h.now()
		reader := h.Keys.ReaderHash(c.Reader)
		h.Recorder.Record(Event{Issue: c.Issue, Open: true, ReaderHash: reader, At: now, Sent: c.Sent,
			Machine: h.Classify.Open(r, c, reader, now)})
	}
	w.Header().Set("Content-Type", "image/gif")
	w.Header().Set("Cache-Control", "no-store, private")
	w.Header().Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(pixel) // a failed write is the client gone
}

var errNoLink = errors.New("no such link")

// linkTTL is how long an issue's links are taken from memory before they
// are read again (an issue corrected after sending changes them); when
// Redis is away, the last ones read stay in use.
const linkTTL = time.Minute

// staleRead bounds the read of links the cache holds a stale copy of.
const staleRead = 250 * time.Millisecond

// maxCachedIssues bounds the issues whose links are kept in memory.
const maxCachedIssues = 4096

type linkCache struct {
	mu     sync.Mutex
	issues map[int64]cachedLinks
}

type cachedLinks struct {
	urls []string
	read time.Time
}

// target is the stored target of the issue's link index.
func (h *Handler) target(ctx context.Context, issue int64, index int) (string, error) {
	now := h.now()
	h.cache.mu.Lock()
	c, ok := h.cache.issues[issue]
	h.cache.mu.Unlock()
	if !ok || now.Sub(c.read) > linkTTL {
		rctx := ctx
		if ok {
			// A stale copy is at hand: a slow Redis does not hold the
			// reader up for long.
			var cancel context.CancelFunc
			rctx, cancel = context.WithTimeout(ctx, staleRead)
			defer cancel()
		}
		urls, err := h.Links.IssueLinks(rctx, issue)
		switch {
		case err == nil:
			c = cachedLinks{urls: urls, read: now}
			h.cache.mu.Lock()
			if h.cache.issues == nil || len(h.cache.issues) >= maxCachedIssues {
				h.cache.issues = map[int64]cachedLinks{}
			}
			h.cache.issues[issue] = c
			h.cache.mu.Unlock()
		case !ok:
			return "", err
		}
		// else: Redis away, the links read before are still good.
	}
	if index < 0 || index >= len(c.urls) {
		return "", errNoLink
	}
	return c.urls[index], nil
}
