package console

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/services/issues"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// page is what every template sees.
type page struct {
	Title string
	// Section names the navigation entry to highlight.
	Section string
	User    Principal
	// Notice is a done action's message, Error a failed one's.
	Notice, Error string
	// Refresh reloads the page every so many seconds where no script
	// runs (progress while sending); 0: never.
	Refresh int
	// Data is the screen's own.
	Data any
}

// can tells the templates whether the signed-in role allows need (they
// hide what the role may not do; the routes enforce it).
func (p page) Can(need string) bool { return p.User.Role.Allows(Role(need)) }

// IsAccount tells the templates that an account (not a token) signed in:
// it has a page of its own (/admin/account).
func (p page) IsAccount() bool { return strings.Contains(p.User.Name, "@") }

// actionLabels are the bulk actions (listjobs.Actions) in the
// publisher's words; the form still posts the action's name.
var actionLabels = map[string]string{
	"add_topic": "Add to a topic", "remove_topic": "Remove from a topic", "add_tag": "Add a tag",
	"remove_tag": "Remove a tag", "unsubscribe": "Unsubscribe", "erase": "Erase for good",
}

var funcs = template.FuncMap{
	"actionLabel": func(action string) string {
		if l, ok := actionLabels[action]; ok {
			return l
		}
		return action
	},
	"date": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"day": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02")
	},
	"percent": func(part, whole int64) string {
		if whole <= 0 {
			return "0%"
		}
		return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64) + "%"
	},
	"num":  func(n int64) string { return groupDigits(n) },
	"join": strings.Join,
	// kb is a size in bytes as the size guard counts it ("93.4 KB").
	"kb": issues.KB,
	// purgeAt is when a trashed issue is removed for good.
	"purgeAt": issues.PurgeAt,
	// searchScan is how many of the newest issues a search reads.
	"searchScan": func() int { return issues.SearchScan },
}

// groupDigits writes n with thin spaces between thousands (1 234 567).
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString("\u202f")
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

var templates = map[string]*template.Template{}

func init() {
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		templates[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", n))
	}
}

// render writes the page name with code.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	t, ok := templates[name]
	if !ok {
		panic("console: no template " + name)
	}
	p.User = principalOf(r)
	if p.Notice == "" {
		p.Notice = notices[r.URL.Query().Get("done")]
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := t.ExecuteTemplate(w, "layout", p); err != nil {
		// The status is sent: a half page is all there is to give.
		h.d.Log.Error("console: page not rendered", "page", name, "err", err)
	}
}

// notices are the messages a redirect after an action names (?done=…):
// fixed texts, so a link cannot make the console say anything else.
var notices = map[string]string{
	"saved":            "Saved.",
	"created":          "Created.",
	"tested":           "The test mail was sent.",
	"sending":          "Sending has started.",
	"scheduled":        "The issue is scheduled.",
	"paused":           "Paused: no new batch starts; resume carries on where it stopped.",
	"resumed":          "Resumed.",
	"cancelled":        "Cancelled.",
	"lifted":           "The suppression was lifted.",
	"topics":           "The topics were changed.",
	"left":             "The subscription was ended.",
	"erased":           "The person was erased: only a keyed hash of the address is left.",
	"revoked":          "The token was revoked; its sessions have ended.",
	"item":             "The item was added.",
	"signed-out":       "Signed out.",
	"password":         "Your password was changed; your other sessions have ended.",
	"invited":          "The invite was mailed; its link works once, for 48 hours.",
	"invite-revoked":   "The invite was revoked: its link no longer works.",
	"role":             "The role was changed; it holds from that person's next click.",
	"suspended":        "The account was suspended: it cannot sign in, and its sessions have ended.",
	"restored":         "The account may sign in again.",
	"item-saved":       "The item was saved.",
	"item-deleted":     "The item was deleted.",
	"digest-queued":    "This week's digest is queued: it is planned and sent in a moment.",
	"digest-already":   "This week's digest is already queued or running: nothing more was done.",
	"duplicated":       "This is a copy: a new draft.",
	"trashed":          "Moved to trash.",
	"untrashed":        "Restored from the trash, as it was.",
	"untrashed-draft":  "Restored from the trash as a draft: it was scheduled; send or schedule it again.",
	"version-restored": "The version was restored as the newest one.",
	"segment-saved":    "The segment was saved.",
	"segment-deleted":  "The segment was deleted.",
	"field-saved":      "The field was declared.",
	"webhook-tested":   "A test event is queued: its delivery shows below in a moment (reload).",
	"webhook-enabled":  "The endpoint is enabled.",
	"webhook-disabled": "The endpoint is disabled: it gets nothing until enabled.",
	"webhook-removed":  "The endpoint was removed.",
	"added":            "The person was added.",
	"edited":           "The changes were saved.",
	"bulk":             "The action was applied to the people ticked (each one recorded in one audit entry).",
}

// errorPage is a page that says what went wrong, in the console's
// layout.
func (h *Handler) errorPage(w http.ResponseWriter, r *http.Request, code int, title, msg string) {
	if wantsJSON(r) {
		webjson.Write(w, code, map[string]string{"error": msg})
		return
	}
	h.render(w, r, code, "error", page{Title: title, Error: msg})
}

// storeAway answers a store that failed: Redis is away or too slow. The
// page says so; the error goes to the log, never to the page.
func (h *Handler) storeAway(w http.ResponseWriter, r *http.Request, err error) {
	h.d.Log.Error("console: the store failed", "path", logredact.Clip(r.URL.Path), "err", err)
	h.errorPage(w, r, http.StatusServiceUnavailable, "Redis is not answering",
		"The console cannot reach its database (Redis) just now, so nothing was read or changed. Try again in a moment; if it lasts, check Redis and /healthz.")
}

// done redirects after a successful form to path with a notice.
func done(w http.ResponseWriter, r *http.Request, path, notice string) {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	http.Redirect(w, r, path+sep+"done="+notice, http.StatusSeeOther)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// pathID reads the route's {name} as a positive id.
func pathID(r *http.Request, name string) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	return id, err == nil && id > 0
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request, what string) {
	h.errorPage(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("There is no such %s.", what))
}

// static serves the console's stylesheet and script.
func (h *Handler) static() http.Handler {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix("/admin/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}
