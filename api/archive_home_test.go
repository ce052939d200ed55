package api_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/store"
)

// homeServer is the archive's API with the newsletter's settings.
func (e *archiveEnv) homeServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := api.New(api.Config{Topics: e.set, Origin: "https://news.example.com"},
		api.Deps{Store: e.st, Archive: e.st, Markdown: realMarkdown, Now: e.clock.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Settings: settings.Fixed(store.Settings{Name: "Café Weekly", Description: "Coffee, every Monday.", LogoURL: "https://example.com/logo.png", Accent: "#aa3300"})})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// TestArchiveIsAHome: every archive page names the newsletter, describes
// it, offers the subscribe box (posting to the signup form's endpoint,
// with its honeypot), and carries Open Graph and Twitter tags and the
// feed's alternate link; the issue page's own address and summary.
func TestArchiveIsAHome(t *testing.T) {
	e := newArchiveEnv(t)
	e.seed(t)
	srv := e.homeServer(t)
	common := []string{
		`<strong>Café Weekly</strong>`, `Coffee, every Monday.`,
		`<img class="nl-logo" src="https://example.com/logo.png" alt="Café Weekly">`,
		`<form class="subscribe" method="post" action="/subscribe"`, `name="website"`, `Subscribe to Café Weekly`,
		`<meta property="og:site_name" content="Café Weekly">`, `<meta property="og:image" content="https://example.com/logo.png">`,
		`<meta name="twitter:card" content="summary">`,
		`<link rel="alternate" type="application/atom+xml" title="Café Weekly" href="/archive/feed.atom">`,
		`<body style="--accent:#aa3300">`,
	}
	for path, own := range map[string][]string{
		"/archive": {`<title>Archive · Café Weekly</title>`, `<meta property="og:title" content="Archive">`,
			`<meta property="og:url" content="https://news.example.com/archive">`, `<meta property="og:description" content="Coffee, every Monday.">`},
		"/archive/first-letter": {`<title>First letter · Café Weekly</title>`, `<meta property="og:type" content="article">`,
			`<meta property="og:url" content="https://news.example.com/archive/first-letter">`,
			`<meta property="og:description" content="About First letter">`},
	} {
		resp, body := get(t, srv.URL+path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		for _, want := range append(common, own...) {
			if !strings.Contains(body, want) {
				t.Errorf("%s lacks %q", path, want)
			}
		}
		if n := strings.Count(body, `src="https://example.com/logo.png"`); n != 1 {
			t.Errorf("%s shows the logo %d times, want once (its header's)", path, n)
		}
	}
	// The feed is the newsletter's.
	if _, feed := get(t, srv.URL+"/archive/feed.atom"); !strings.Contains(feed, "<title>Café Weekly</title>") || !strings.Contains(feed, "<name>Café Weekly</name>") {
		t.Errorf("feed: %.400s", feed)
	}
}

// TestArchiveByTopicAndYear: /archive/topic/{id} lists that topic's
// public letters with its own feed and a subscribe box for it; a private
// or unknown topic is a 404; ?year= lists the letters sent that year.
func TestArchiveByTopicAndYear(t *testing.T) {
	e := newArchiveEnv(t)
	e.clock.Add(-365 * 24 * time.Hour) // 2025
	e.publish(t, "Old letter", "From last year", true, "digest")
	e.clock.Add(365 * 24 * time.Hour)
	e.seed(t)
	srv := e.homeServer(t)

	resp, body := get(t, srv.URL+"/archive/topic/updates")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("topic page: %d", resp.StatusCode)
	}
	for _, want := range []string{`<h1>Product updates</h1>`, `href="/archive/second-letter"`, `href="/archive/feed.atom?topic=updates"`,
		`<input type="hidden" name="topics" value="updates">`, `<meta property="og:url" content="https://news.example.com/archive/topic/updates">`} {
		if !strings.Contains(body, want) {
			t.Errorf("topic page lacks %q", want)
		}
	}
	for _, not := range []string{"first-letter", "old-letter", "team-only", "mixed-audience"} {
		if strings.Contains(body, "/archive/"+not) {
			t.Errorf("topic page lists %s", not)
		}
	}
	for _, path := range []string{"/archive/topic/team", "/archive/topic/nope"} {
		if resp, _ := get(t, srv.URL+path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, resp.StatusCode)
		}
	}

	_, body = get(t, srv.URL+"/archive?year=2025")
	if !strings.Contains(body, `href="/archive/old-letter"`) || strings.Contains(body, `href="/archive/first-letter"`) || !strings.Contains(body, "<h1>Archive 2025</h1>") {
		t.Errorf("2025: %s", body)
	}
	_, body = get(t, srv.URL+"/archive?year=2026")
	if strings.Contains(body, `href="/archive/old-letter"`) || !strings.Contains(body, `href="/archive/first-letter"`) || !strings.Contains(body, `href="/archive/second-letter"`) {
		t.Errorf("2026: %s", body)
	}
	// The full list links to the years it shows.
	if _, body = get(t, srv.URL+"/archive"); !strings.Contains(body, `<a href="?year=2025">2025</a>`) {
		t.Errorf("the list does not link its years: %s", body)
	}
	for _, bad := range []string{"/archive?year=abc", "/archive?year=0999", "/archive?year=12"} {
		if resp, _ := get(t, srv.URL+bad); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", bad, resp.StatusCode)
		}
	}
}
