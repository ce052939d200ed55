package mailer

import (
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Mailbox is the dev mailbox: a Mailer that keeps the last mails in memory
// instead of sending them, and an http.Handler that shows them.
type Mailbox struct {
	mu    sync.Mutex
	mails []*Message // oldest first
	limit int
}

// NewMailbox keeps at most limit mails (default 500).
func NewMailbox(limit int) *Mailbox {
	if limit <= 0 {
		limit = 500
	}
	return &Mailbox{limit: limit}
}

// Send implements Mailer.
func (b *Mailbox) Send(_ context.Context, msg *Message) error {
	cp := *msg
	if cp.MessageID == "" {
		cp.MessageID = newMessageID("", "dev.localhost")
	}
	if cp.Date.IsZero() {
		cp.Date = time.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mails = append(b.mails, &cp)
	if len(b.mails) > b.limit {
		b.mails = b.mails[len(b.mails)-b.limit:]
	}
	return nil
}

// Mails returns copies of the kept mails, newest first.
func (b *Mailbox) Mails() []Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Message, len(b.mails))
	for i, m := range b.mails {
		out[len(b.mails)-1-i] = *m
	}
	return out
}

type mailView struct {
	Message
	Headers  map[string]string
	TextHTML template.HTML
}

var urlPattern = regexp.MustCompile(`https?://[^\s<>"]+`)

// linkify escapes text and makes its URLs clickable.
func linkify(text string) template.HTML {
	var sb strings.Builder
	last := 0
	for _, loc := range urlPattern.FindAllStringIndex(text, -1) {
		sb.WriteString(template.HTMLEscapeString(text[last:loc[0]]))
		u := template.HTMLEscapeString(text[loc[0]:loc[1]])
		sb.WriteString(`<a href="` + u + `">` + u + `</a>`)
		last = loc[1]
	}
	sb.WriteString(template.HTMLEscapeString(text[last:]))
	return template.HTML(sb.String())
}

var mailboxPage = template.Must(template.New("mailbox").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Dev mailbox ({{len .}})</title>
<style>body{font-family:system-ui,sans-serif;max-width:860px;margin:0 auto;padding:16px;color:#1d1d1b}
article{border:1px solid #ddd;border-radius:8px;margin:16px 0;padding:12px 16px}
h2{font-size:18px;margin:0 0 4px}.meta{color:#555;font-size:13px}pre{white-space:pre-wrap;background:#f6f6f4;padding:12px;border-radius:6px}
iframe{width:100%;height:320px;border:1px solid #eee}</style></head>
<body><h1>Dev mailbox</h1><p>{{len .}} mail(s), newest first. Nothing here was sent: set NEWSLETTER_SMTP_URL to deliver. <a href="?format=json">JSON</a></p>
{{range .}}<article class="mail" data-kind="{{.Kind}}">
<h2>{{.Subject}}</h2>
<div class="meta">To <span class="to">{{.To}}</span> · {{.Kind}} · {{.Date.Format "2006-01-02 15:04:05"}} · Message-ID &lt;{{.MessageID}}&gt;</div>
{{range $k, $v := .Headers}}<div class="meta">{{$k}}: {{$v}}</div>{{end}}
<pre>{{.TextHTML}}</pre>
<details><summary>HTML part</summary><iframe sandbox="allow-popups allow-top-navigation-by-user-activation" srcdoc="{{.HTML}}" title="HTML part of {{.Subject}}"></iframe></details>
</article>{{else}}<p>No mail yet. Subscribe on <a href="/">the form</a>.</p>{{end}}
</body></html>`))

// ServeHTTP shows the mails as a page, or as JSON with ?format=json.
func (b *Mailbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mails := b.Mails()
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(mails) // a client gone mid-body has nothing to hear
		return
	}
	views := make([]mailView, len(mails))
	for i, m := range mails {
		views[i] = mailView{Message: m, Headers: listHeaders(&m, ""), TextHTML: linkify(m.Text)}
	}
	// The same defences as the service's own pages: no script, nothing
	// fetched, not framed; each mail's HTML part sits in a sandboxed frame.
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := mailboxPage.Execute(w, views); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
