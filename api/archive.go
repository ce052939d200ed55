package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

// The public archive: every sent issue whose topics are all public (the
// topics file's "archive: false" makes one private) is a web page at
// /archive/{slug}, listed at /archive and in the Atom feed
// /archive/feed.atom. The page is the issue's Markdown rendered by the
// mailer's renderer (injected: the API never imports the mailer), in
// the site's layout, with no personal link: no unsubscribe token, no
// address, nothing of the reader who followed "view in the browser".

// ArchiveStore is the store's side of the archive.
type ArchiveStore interface {
	IssueBySlug(ctx context.Context, slug string) (store.Issue, error)
	SentIssues(ctx context.Context, topic string, after int64, limit int) ([]store.Issue, error)
	ArchiveGeneration(ctx context.Context) (int64, error)
}

// MarkdownRenderer renders an issue's body as the mail's HTML part has
// it (the binary injects the mailer's renderer).
type MarkdownRenderer interface {
	MarkdownHTML(src string) (template.HTML, error)
}

// MarkdownFunc is a function as a MarkdownRenderer.
type MarkdownFunc func(src string) (template.HTML, error)

// MarkdownHTML implements MarkdownRenderer.
func (f MarkdownFunc) MarkdownHTML(src string) (template.HTML, error) { return f(src) }

// The archive's sizes and cache times (the reference lists them).
const (
	// ArchivePage is how many issues /archive lists per page.
	ArchivePage = 50
	// ArchiveFeedEntries is how many issues the feed carries.
	ArchiveFeedEntries = 20
	// DefaultArchiveRecheck is how often a process reads the archive's
	// generation: a newly sent issue shows within this time.
	DefaultArchiveRecheck = 5 * time.Second
	// archiveCacheEntries bounds the cached answers (pages, lists,
	// feeds, 404s) per process.
	archiveCacheEntries = 1024
)

var archivePages = map[string]*template.Template{}

func init() {
	for _, name := range []string{"archive", "archive-issue"} {
		archivePages[name] = template.Must(template.ParseFS(pageFiles, "pages/layout.html", "pages/archive-parts.html", "pages/"+name+".html"))
	}
}

func (s *Server) archiveRoutes() {
	if s.deps.Archive == nil || s.deps.Markdown == nil {
		return
	}
	s.archive = newArchiveCache(s.cfg.ArchiveRecheck, s.deps.Now)
	s.mux.HandleFunc("GET /archive", s.cached(s.archiveList))
	s.mux.HandleFunc("GET /archive/{$}", s.cached(s.archiveList))
	s.mux.HandleFunc("GET /archive/feed.atom", s.cached(s.archiveFeed))
	// A topic's letters: a path of two segments, which no issue's slug
	// (one segment) can take. Years are a query (?year=2026) on both
	// lists, because a slug may well be "2026".
	s.mux.HandleFunc("GET /archive/topic/{topic}", s.cached(s.archiveList))
	s.mux.HandleFunc("GET /archive/{slug}", s.cached(s.archiveIssue))
}

// public tells whether is belongs in the archive: sent, and every one of
// its topics public (a letter that also went to a private topic is not
// published because it went to a public one too); an issue sent to a
// segment never is (it was written for those people).
func (s *Server) public(is store.Issue) bool {
	if is.Status != store.IssueSent || len(is.Topics) == 0 || is.Segment != 0 {
		return false
	}
	for _, t := range is.Topics {
		if !s.cfg.Topics.Current().Public(t) {
			return false
		}
	}
	return true
}

// archived is the answer the cache keeps: built once per generation.
type archived struct {
	code         int
	contentType  string
	cacheControl string
	body         []byte
	etag         string
}

// archiveBuilder builds the answer to r, or an error for a store that
// failed (not cached: the next request tries again).
type archiveBuilder func(r *http.Request) (archived, error)

func (s *Server) notFoundArchive(r *http.Request) archived {
	var b bytes.Buffer
	_ = archivePages["archive"].ExecuteTemplate(&b, "layout", archivePage{Title: "Not in the archive", Missing: true, Newsletter: s.newsletter(r)})
	return archived{code: http.StatusNotFound, contentType: "text/html; charset=utf-8", cacheControl: "no-cache", body: b.Bytes()}
}

// cached serves build's answer from the process's cache: after the first
// request, none costs a store round trip until the archive's generation
// moves (read at most every ArchiveRecheck, by one request at a time).
func (s *Server) cached(build archiveBuilder) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, ok := archiveKey(r)
		// The pages show the settings (name, logo, description): a
		// change to them is a new set of answers.
		key = strconv.FormatInt(s.newsletter(r).Version, 10) + " " + key
		var a archived
		if !ok {
			a = s.notFoundArchive(r)
		} else {
			var err error
			a, err = s.archive.get(r.Context(), s.deps.Archive, key, func() (archived, error) { return build(r) })
			if err != nil {
				s.deps.Log.Error("archive: read the issues", "path", logredact.Clip(r.URL.Path), "err", err)
				message(w, http.StatusServiceUnavailable, "Try again soon", "The archive could not be read just now.")
				return
			}
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", a.cacheControl)
		h.Set("X-Content-Type-Options", "nosniff")
		if a.contentType != atomType {
			// Issue images may come from anywhere on the web; nothing
			// else loads, and no script runs.
			h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src https: http:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
		}
		if a.etag != "" {
			h.Set("ETag", a.etag)
			if etagMatch(r.Header.Get("If-None-Match"), a.etag) {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		h.Set("Content-Length", strconv.Itoa(len(a.body)))
		w.WriteHeader(a.code)
		if r.Method != http.MethodHead {
			_, _ = w.Write(a.body) // the status is sent; a client gone mid-body has nothing to hear
		}
	}
}

// archiveKey is the cache key of r: its path and the query parameters
// the archive reads, checked (false: a 404 without a store read).
func archiveKey(r *http.Request) (string, bool) {
	q := url.Values{}
	switch r.Pattern {
	case "GET /archive/{slug}":
		// A path that cannot be a slug is a 404 without a store read.
		if !store.ValidSlug(r.PathValue("slug")) {
			return "", false
		}
	case "GET /archive/feed.atom":
		if t := r.URL.Query().Get("topic"); t != "" {
			q.Set("topic", t)
		}
	default:
		if y := r.URL.Query().Get("year"); y != "" {
			if n, err := strconv.Atoi(y); err != nil || n < 1970 || n > 9999 || strconv.Itoa(n) != y {
				return "", false
			}
			q.Set("year", y)
		}
		if a := r.URL.Query().Get("after"); a != "" {
			if n, err := strconv.ParseInt(a, 10, 64); err != nil || n <= 0 {
				return "", false
			}
			q.Set("after", a)
		}
	}
	return r.URL.Path + "?" + q.Encode(), true
}

func etagMatch(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, part := range bytes.Split([]byte(header), []byte(",")) {
		p := string(bytes.TrimSpace(part))
		if p == "*" || p == etag || p == "W/"+etag {
			return true
		}
	}
	return false
}

func withETag(a archived) archived {
	sum := sha256.Sum256(a.body)
	a.etag = `"` + hex.EncodeToString(sum[:12]) + `"`
	return a
}

// archivePage is what the archive templates see (the layout's Title).
type archivePage struct {
	Title   string
	Missing bool
	// The list's.
	Issues []archiveEntry
	Older  string
	// Topic is the topic a list shows (Topic.ID "": every public one),
	// Year the year (0: all); Years the years of the listed letters,
	// Topics the public topics, as links.
	Topic  topics.Topic
	Year   int
	Years  []int
	Topics []topics.Topic
	// The issue's.
	Issue   archiveEntry
	Body    template.HTML
	FeedURL string
	// Newsletter are the settings in effect: the header, the
	// description, the logo in the Open Graph tags.
	Newsletter store.Settings
	// URL is the page's own address (og:url); Summary its description
	// (og:description).
	URL, Summary string
}

type archiveEntry struct {
	Slug, Subject, Preheader string
	Sent                     time.Time
}

func entryOf(is store.Issue) archiveEntry {
	return archiveEntry{Slug: is.Slug, Subject: is.Subject, Preheader: is.Preheader, Sent: is.SentAt}
}

func htmlAnswer(p archivePage, cacheControl string) (archived, error) {
	var b bytes.Buffer
	if err := archivePages[map[bool]string{true: "archive-issue", false: "archive"}[p.Body != ""]].ExecuteTemplate(&b, "layout", p); err != nil {
		return archived{}, err
	}
	return withETag(archived{code: http.StatusOK, contentType: "text/html; charset=utf-8", cacheControl: cacheControl, body: b.Bytes()}), nil
}

// publicIssues are up to limit public sent issues of topic ("" : all)
// below after, newest first, and whether there are more.
func (s *Server) publicIssues(ctx context.Context, topic string, after int64, limit int, keep func(store.Issue) bool) ([]store.Issue, bool, error) {
	var out []store.Issue
	for {
		page, err := s.deps.Archive.SentIssues(ctx, topic, after, limit+1)
		if err != nil {
			return nil, false, err
		}
		for _, is := range page {
			if s.public(is) && (keep == nil || keep(is)) {
				if len(out) == limit {
					return out, true, nil
				}
				out = append(out, is)
			}
		}
		if len(page) < limit+1 {
			return out, false, nil
		}
		after = page[len(page)-1].ID
	}
}

// archiveList is /archive and /archive/topic/{topic}, each for a
// ?year= too: the letters newest first, a page at a time.
func (s *Server) archiveList(r *http.Request) (archived, error) {
	q := r.URL.Query()
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64) // checked by archiveKey
	year, _ := strconv.Atoi(q.Get("year"))               // checked by archiveKey
	p := archivePage{Title: "Archive", FeedURL: "/archive/feed.atom", Newsletter: s.newsletter(r), Year: year}
	for _, t := range s.cfg.Topics.Current().Topics {
		if s.cfg.Topics.Current().Public(t.ID) {
			p.Topics = append(p.Topics, t)
		}
	}
	self := "/archive"
	if id := r.PathValue("topic"); id != "" {
		t, ok := s.cfg.Topics.Current().Topic(id)
		if !ok || !s.cfg.Topics.Current().Public(id) {
			return s.notFoundArchive(r), nil
		}
		p.Topic, p.Title = t, t.Name
		self = "/archive/topic/" + url.PathEscape(id)
		p.FeedURL += "?topic=" + url.QueryEscape(id)
	}
	var keep func(store.Issue) bool
	if year > 0 {
		keep = func(is store.Issue) bool { return is.SentAt.UTC().Year() == year }
		p.Title += " " + strconv.Itoa(year)
	}
	list, more, err := s.publicIssues(r.Context(), p.Topic.ID, after, ArchivePage, keep)
	if err != nil {
		return archived{}, err
	}
	for _, is := range list {
		p.Issues = append(p.Issues, entryOf(is))
		if y := is.SentAt.UTC().Year(); !slices.Contains(p.Years, y) && y != year {
			p.Years = append(p.Years, y)
		}
	}
	page := self
	if year > 0 {
		page += "?year=" + strconv.Itoa(year)
	}
	p.URL, p.Summary = s.cfg.Origin+page, p.Newsletter.Description
	if more {
		sep := "?"
		if year > 0 {
			sep = "&"
		}
		p.Older = page + sep + "after=" + strconv.FormatInt(list[len(list)-1].ID, 10)
	}
	return htmlAnswer(p, "public, max-age=60")
}

func (s *Server) archiveIssue(r *http.Request) (archived, error) {
	is, err := s.deps.Archive.IssueBySlug(r.Context(), r.PathValue("slug"))
	if errors.Is(err, store.ErrNoIssue) || (err == nil && !s.public(is)) {
		// Unknown, not sent yet, or private: the same answer, so the
		// archive tells nothing of drafts or private letters.
		return s.notFoundArchive(r), nil
	}
	if err != nil {
		return archived{}, err
	}
	body, err := s.deps.Markdown.MarkdownHTML(is.Body)
	if err != nil {
		return archived{}, err
	}
	// A sent issue never changes: a cache may keep its page a while.
	st := s.newsletter(r)
	summary := is.Preheader
	if summary == "" {
		summary = st.Description
	}
	return htmlAnswer(archivePage{Title: is.Subject, Issue: entryOf(is), Body: body, FeedURL: "/archive/feed.atom", Newsletter: st,
		URL: s.cfg.Origin + "/archive/" + is.Slug, Summary: summary}, "public, max-age=300")
}

// The Atom feed (RFC 4287). Ids are the pages' addresses under
// NEWSLETTER_BASE_URL: stable across restarts and processes, unique
// because slugs are.
const atomType = "application/atom+xml; charset=utf-8"

type atomFeed struct {
	XMLName xml.Name    `xml:"http://www.w3.org/2005/Atom feed"`
	ID      string      `xml:"id"`
	Title   string      `xml:"title"`
	Updated string      `xml:"updated"`
	Author  atomPerson  `xml:"author"`
	Links   []atomLink  `xml:"link"`
	Entries []atomEntry `xml:"entry"`
}

type atomPerson struct {
	Name string `xml:"name"`
}

type atomLink struct {
	Rel  string `xml:"rel,attr"`
	Type string `xml:"type,attr,omitempty"`
	Href string `xml:"href,attr"`
}

type atomText struct {
	Type string `xml:"type,attr"`
	Body string `xml:",chardata"`
}

type atomEntry struct {
	ID        string    `xml:"id"`
	Title     string    `xml:"title"`
	Updated   string    `xml:"updated"`
	Published string    `xml:"published"`
	Link      atomLink  `xml:"link"`
	Summary   *atomText `xml:"summary,omitempty"`
	Content   atomText  `xml:"content"`
}

func (s *Server) archiveFeed(r *http.Request) (archived, error) {
	topic := r.URL.Query().Get("topic")
	if topic != "" && !s.cfg.Topics.Current().Public(topic) {
		return s.notFoundArchive(r), nil
	}
	list, _, err := s.publicIssues(r.Context(), topic, 0, ArchiveFeedEntries, nil)
	if err != nil {
		return archived{}, err
	}
	base := s.cfg.Origin
	self := base + "/archive/feed.atom"
	name := s.newsletter(r).Name
	title := name
	if topic != "" {
		self += "?topic=" + url.QueryEscape(topic)
		t, _ := s.cfg.Topics.Current().Topic(topic)
		title += ": " + t.Name
	}
	f := atomFeed{ID: self, Title: title, Author: atomPerson{Name: name},
		// An empty feed has no date of its own: the epoch keeps it stable.
		Updated: time.Unix(0, 0).UTC().Format(time.RFC3339),
		Links:   []atomLink{{Rel: "self", Type: "application/atom+xml", Href: self}, {Rel: "alternate", Type: "text/html", Href: base + "/archive"}}}
	var newest time.Time
	for _, is := range list {
		body, err := s.deps.Markdown.MarkdownHTML(is.Body)
		if err != nil {
			return archived{}, err
		}
		sent := is.SentAt.UTC().Format(time.RFC3339)
		if is.SentAt.After(newest) {
			newest, f.Updated = is.SentAt, sent
		}
		e := atomEntry{ID: base + "/archive/" + is.Slug, Title: is.Subject, Updated: sent, Published: sent,
			Link: atomLink{Rel: "alternate", Type: "text/html", Href: base + "/archive/" + is.Slug}, Content: atomText{Type: "html", Body: string(body)}}
		if is.Preheader != "" {
			e.Summary = &atomText{Type: "text", Body: is.Preheader}
		}
		f.Entries = append(f.Entries, e)
	}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	if err := xml.NewEncoder(&b).Encode(f); err != nil {
		return archived{}, err
	}
	return withETag(archived{code: http.StatusOK, contentType: atomType, cacheControl: "public, max-age=60", body: b.Bytes()}), nil
}
