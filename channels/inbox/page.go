package inbox

import (
	"embed"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/newsletter/newsletter/channels"
)

//go:embed assets
var assets embed.FS

var pageTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
	// rendered marks a message's body as the HTML it is: renderBody's
	// output, whose raw HTML and unsafe links goldmark left out.
	"rendered": func(s string) template.HTML { return template.HTML(s) }, //nolint:gosec // goldmark's safe output
}).ParseFS(assets, "assets/page.html"))

// pageData is what the no-JS page shows.
type pageData struct {
	Messages []Message
	Unread   int64
	Archived bool
	// Query carries the reader's subscriber and hash to the page's links
	// and forms.
	Query template.URL
	Next  string
	Base  string
}

// page serves GET / (the root, /inbox): the reader's inbox as a page
// that needs no script, for any web view: each message with forms to
// mark it read, unread or archived, and one to mark all read.
func (c *Channel) page(w http.ResponseWriter, r *http.Request, p channels.Person) {
	q := r.URL.Query()
	archived := q.Get("archived") == "1"
	if !validCursor(q.Get("cursor")) {
		http.Error(w, "cursor: not one this service gave", http.StatusBadRequest)
		return
	}
	a, err := c.page1(r.Context(), p, q.Get("cursor"), 20, archived)
	if err != nil {
		c.unavailable(w, err)
		return
	}
	subscriber, hash := credentials(r)
	creds := url.Values{"subscriber": {subscriber}, "hash": {hash}}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// The page's URL carries the signature: no other site learns it
	// from a Referer, and nothing but its own forms and styles runs.
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src https: data:; form-action 'self'; base-uri 'none'; frame-ancestors 'self'"+frameAncestors(c.cfg.Origins))
	h.Set("X-Content-Type-Options", "nosniff")
	d := pageData{Messages: a.Messages, Unread: a.Unread, Archived: archived, Query: template.URL(creds.Encode()), Next: a.Next, Base: pageBase(r)} //nolint:gosec // url.Values.Encode escapes every value
	if err := pageTemplate.Execute(w, d); err != nil {
		c.log.Warn("inbox: render the page", "err", err)
	}
}

// frameAncestors lets the product's origins frame the page.
func frameAncestors(origins []string) string {
	if len(origins) == 0 {
		return ""
	}
	return " " + strings.Join(origins, " ")
}

// script serves GET /inbox.js: the web component <newsletter-inbox>.
func (c *Channel) script(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeFileFS(w, r, assets, "assets/inbox.js")
}
