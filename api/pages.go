package api

import (
	"embed"
	"html/template"
	"net/http"
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
}

var pages = map[string]*template.Template{}

func init() {
	for _, name := range []string{"form", "message", "unsubscribe", "confirm"} {
		pages[name] = template.Must(template.ParseFS(pageFiles, "pages/layout.html", "pages/"+name+".html"))
	}
}

func renderPage(w http.ResponseWriter, code int, name string, d pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	// The templates are parsed at start and their data is ours: an error
	// here is a client that left mid-page.
	_ = pages[name].ExecuteTemplate(w, "layout", d)
}

func message(w http.ResponseWriter, code int, title string, lines ...string) {
	renderPage(w, code, "message", pageData{Title: title, Lines: lines, Back: code >= 400})
}
