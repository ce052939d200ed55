package api

import (
	"embed"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

//go:embed pages/*.html
var pageFiles embed.FS

// pageData is what every page template sees.
type pageData struct {
	Title string
	Error string
	Email string
	Token string
	Lines []string
	Back  bool
	// Topics are the form's and the preference centre's checkboxes.
	Topics []topicChoice
	// Topic names the one topic an unsubscribe link leaves ("" : all).
	Topic          string
	Name, Timezone string
	// Push, when set, offers web push on the page ("Also notify this
	// browser"), which then loads /push.js.
	Push *pushOffer
	// Next is where the page leads on (the confirmed page's "after
	// confirming, go to"; nil: nowhere).
	Next *pageLink
	// ChannelsNote says something about the person's channels (a number
	// that replied STOP).
	ChannelsNote string
	// SMS, when set, is the preference centre's "Text messages" section
	// (SMS is on): the person's number, or a code waiting, or the form
	// to give one.
	SMS *smsOffer
	// DataRequests adds the buttons of the personal data requests
	// (export, erase) with Token to a message page: a person whose
	// subscription ended still has their data with us.
	DataRequests bool
	// Undo, on the page that says a person is unsubscribed, is the
	// resubscribe token of its button (resubscribe.go; "" : no button).
	Undo string
	// Fresh, on the page of an expired preferences link, is that link's
	// token, for the button that mails a fresh one (fresh.go).
	Fresh string
	// Newsletter are the settings in effect (renderPage fills them in
	// from the writer when the handler did not).
	Newsletter store.Settings
}

// pageLink is a link a page leads on with.
type pageLink struct{ URL, Label string }

// topicChoice is one topic's checkbox.
type topicChoice struct {
	topics.Topic
	Checked bool
	// Channels are the topic's channel checkboxes (the preference
	// centre's; channels.go).
	Channels []channelChoice
}

var pages = map[string]*template.Template{}

func init() {
	for _, name := range []string{"form", "message", "unsubscribe", "leave", "confirm", "preferences", "erase"} {
		pages[name] = template.Must(template.ParseFS(pageFiles, "pages/layout.html", "pages/push.html", "pages/datarequests.html", "pages/"+name+".html"))
	}
}

func renderPage(w http.ResponseWriter, code int, name string, d pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if sr := recorderOf(w); sr != nil && d.Newsletter.Name == "" && sr.newsletter != nil {
		d.Newsletter = sr.newsletter()
	}
	csp := "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
	if origin := logoOrigin(d.Newsletter.LogoURL); origin != "" {
		// The header's logo, and nothing else: a page that carries a
		// token loads no other image (which could be a tracker).
		csp += "; img-src " + origin
	}
	if d.Push != nil {
		// The web push offer: our own script, which registers our service
		// worker and posts the subscription to us.
		csp += "; script-src 'self'; connect-src 'self'; worker-src 'self'"
	}
	w.Header().Set("Content-Security-Policy", csp)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	// The templates are parsed at start and their data is ours: an error
	// here is a client that left mid-page.
	_ = pages[name].ExecuteTemplate(w, "layout", d)
}

// logoOrigin is the CSP source of the settings' logo URL: its https
// origin, or "" when there is no logo or it is not plain https (the
// settings refuse such a URL; an older stored one is simply not
// allowed). Only a host of letters, digits, dots, hyphens and a port
// passes, so nothing from the URL can end the directive.
func logoOrigin(logoURL string) string {
	if logoURL == "" {
		return ""
	}
	u, err := url.Parse(logoURL)
	if err != nil || u.Scheme != "https" || u.User != nil || !cspHost.MatchString(u.Host) {
		return ""
	}
	return "https://" + strings.ToLower(u.Host)
}

var cspHost = regexp.MustCompile(`^[A-Za-z0-9.-]+(:[0-9]{1,5})?$`)

func message(w http.ResponseWriter, code int, title string, lines ...string) {
	renderPage(w, code, "message", pageData{Title: title, Lines: lines, Back: code >= 400})
}

// signupChoices are the public form's checkboxes: the topics of the
// public signup, those in checked ticked.
func (s *Server) signupChoices(checked []string) []topicChoice {
	var out []topicChoice
	for _, t := range s.cfg.Topics.Current().Signup() {
		out = append(out, topicChoice{Topic: t, Checked: slices.Contains(checked, t.ID)})
	}
	return out
}

// topicChoices are the preference centre's checkboxes, those in checked
// (the person's) ticked: the topics of the public signup, and the
// Assigned ones the person has (to leave them).
func (s *Server) topicChoices(checked []string) []topicChoice {
	var out []topicChoice
	for _, t := range s.cfg.Topics.Current().Offered() {
		if ticked := slices.Contains(checked, t.ID); !t.Assigned || ticked {
			out = append(out, topicChoice{Topic: t, Checked: ticked})
		}
	}
	return out
}
