package feeds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mmcdole/gofeed"
	"golang.org/x/net/html"

	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/store"
)

// Defaults: a poll that hangs costs one worker slot for at most Timeout,
// and a feed larger than MaxBytes (a runaway or hostile answer) is
// refused rather than read into memory.
const (
	DefaultTimeout  = 20 * time.Second
	DefaultMaxBytes = 2 << 20
	// DefaultUserAgent names the service to the feeds' hosts.
	DefaultUserAgent = "newsletter-feeds/1 (RSS-to-email)"
)

// The limits of an item's fields (the same as POST /api/items').
const (
	maxTitle   = 300
	maxSummary = 2000
)

// Errors by cause, the result label of newsletter_feed_polls_total.
var (
	ErrUnreachable = errors.New("feed unreachable")
	ErrTooLarge    = errors.New("feed too large")
	ErrInvalid     = errors.New("not an RSS or Atom feed")
)

// MaxRedirects is how many redirects a poll follows.
const MaxRedirects = 10

// Fetcher fetches feeds.
type Fetcher struct {
	// Guard keeps polls, and every redirect they follow, away from this
	// machine and its private network, as webhooks and web push are: a
	// feed's host, or a redirect it answers, could name any address.
	// The zero Guard refuses private addresses.
	Guard netguard.Guard
	// Client makes the requests (nil: Guard's client, following up to
	// MaxRedirects redirects). Set, it is used as is: tests only.
	Client   *http.Client
	Timeout  time.Duration
	MaxBytes int64
	// UserAgent names the service to feed hosts.
	UserAgent string

	once    sync.Once
	guarded *http.Client
}

func (f *Fetcher) timeout() time.Duration {
	if f.Timeout <= 0 {
		return DefaultTimeout
	}
	return f.Timeout
}

func (f *Fetcher) client() *http.Client {
	if f.Client != nil {
		return f.Client
	}
	f.once.Do(func() {
		f.guarded = f.Guard.Client(netguard.Limits{Timeout: f.timeout(), FollowRedirects: MaxRedirects})
	})
	return f.guarded
}

// Result is one poll's answer.
type Result struct {
	// NotModified: the server answered 304 to the validators; Entries is
	// empty and the validators stay.
	NotModified  bool
	ETag         string
	LastModified string
	// Entries, oldest first, at most store.FeedMaxEntries (the newest).
	Entries []store.FeedEntry
}

// Fetch GETs feed u, sending the validators of the last answer, and
// parses it. The error wraps ErrUnreachable, ErrTooLarge or ErrInvalid.
func (f *Fetcher) Fetch(ctx context.Context, u, etag, lastModified string) (Result, error) {
	timeout := f.timeout()
	maxBytes := f.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	// The deadline covers the whole exchange, the body included: a server
	// that trickles bytes cannot hold the poll longer.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	req.Header.Set("Accept", "application/rss+xml, application/atom+xml, application/xml;q=0.9, text/xml;q=0.8, */*;q=0.1")
	if f.UserAgent != "" {
		req.Header.Set("User-Agent", f.UserAgent)
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	if lastModified != "" {
		req.Header.Set("If-Modified-Since", lastModified)
	}
	resp, err := f.client().Do(req)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer func() { _ = resp.Body.Close() }() // a read-only body: nothing to lose
	if resp.StatusCode == http.StatusNotModified {
		return Result{NotModified: true, ETag: etag, LastModified: lastModified}, nil
	}
	if resp.StatusCode != http.StatusOK {
		return Result{}, fmt.Errorf("%w: HTTP %d", ErrUnreachable, resp.StatusCode)
	}
	if resp.ContentLength > maxBytes {
		return Result{}, fmt.Errorf("%w: %d bytes announced, at most %d", ErrTooLarge, resp.ContentLength, maxBytes)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return Result{}, fmt.Errorf("%w: reading the answer: %w", ErrUnreachable, err)
	}
	if int64(len(body)) > maxBytes {
		return Result{}, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
	}
	base, _ := url.Parse(resp.Request.URL.String()) // after redirects
	entries, err := Parse(body, base)
	if err != nil {
		return Result{}, err
	}
	return Result{ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified"), Entries: entries}, nil
}

// Parse reads an RSS or Atom document into entries, oldest first. An
// entry without an http(s) link is left out (there is nothing for a
// reader to open, and a javascript: link must never reach a mail);
// relative links are resolved against base.
func Parse(body []byte, base *url.URL) ([]store.FeedEntry, error) {
	feed, err := gofeed.NewParser().Parse(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	out := make([]store.FeedEntry, 0, len(feed.Items))
	for _, it := range feed.Items {
		link := absLink(base, it.Link)
		if link == "" {
			continue
		}
		e := store.FeedEntry{ID: strings.TrimSpace(it.GUID), URL: link}
		if e.ID == "" {
			e.ID = link
		}
		if len(e.ID) > 1024 {
			e.ID = e.ID[:1024] // an id is a Redis set member: bounded
		}
		switch {
		case it.PublishedParsed != nil:
			e.Published = *it.PublishedParsed
		case it.UpdatedParsed != nil:
			e.Published = *it.UpdatedParsed
		}
		e.Title = clip(oneLine(text(it.Title)), maxTitle)
		if e.Title == "" {
			e.Title = clip(link, maxTitle)
		}
		summary := it.Description
		if summary == "" {
			summary = it.Content
		}
		e.Summary = clip(oneLine(text(summary)), maxSummary)
		out = append(out, e)
	}
	// Feeds list the newest first by custom, not by rule: dated entries
	// are put in date order, an undated feed is taken as newest first.
	slices.Reverse(out)
	if !slices.ContainsFunc(out, func(e store.FeedEntry) bool { return e.Published.IsZero() }) {
		slices.SortStableFunc(out, func(a, b store.FeedEntry) int { return a.Published.Compare(b.Published) })
	}
	if len(out) > store.FeedMaxEntries {
		out = out[len(out)-store.FeedMaxEntries:]
	}
	return out, nil
}

func absLink(base *url.URL, raw string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" || strings.ContainsAny(raw, "\r\n") {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.String()
}

// text is the readable text of a feed's field, which may hold HTML: the
// tags go, entities are decoded; scripts and styles are dropped whole.
func text(s string) string {
	if !strings.ContainsAny(s, "<&") {
		return s
	}
	var b strings.Builder
	z := html.NewTokenizer(strings.NewReader(s))
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return b.String()
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text())
			}
		case html.StartTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style":
				skip++
			case "p", "br", "div", "li":
				b.WriteByte(' ')
			}
		case html.EndTagToken:
			if name, _ := z.TagName(); (string(name) == "script" || string(name) == "style") && skip > 0 {
				skip--
			}
		}
	}
}

// oneLine folds runs of white space, line breaks included, into one space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut]) + "…"
}
