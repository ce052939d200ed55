package api

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// TestSignupFormOnAnotherSite is what docs/publishing.md's "Embedding the signup
// form on another site" promises: a plain HTML form elsewhere posts to
// /subscribe and the visitor gets the service's own page; the service's
// pages cannot be framed; a script on another origin gets no CORS answer
// (its preflight is refused), so it cannot read a reply.
func TestSignupFormOnAnotherSite(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true, Origin: "https://news.example.com"})
	post := func(form url.Values) (*http.Response, string) {
		req, _ := http.NewRequest("POST", e.srv.URL+"/subscribe", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://blog.example.org")
		req.Header.Set("Referer", "https://blog.example.org/about")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}

	// The guide's snippet: email, topics_shown, one ticked topic, the
	// empty honeypot.
	resp, body := post(url.Values{"email": {"reader@example.com"}, "topics_shown": {"1"}, "topics": {"digest"}, "website": {""}})
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(body, "Check your inbox") {
		t.Fatalf("a form on another site: %s\n%s", resp.Status, body)
	}
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("the answer page may be framed: %v", resp.Header)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("CORS header on the answer: %v", resp.Header)
	}
	if sub, err := e.store.Get(t.Context(), "reader@example.com"); err != nil || sub.Status != store.Pending || strings.Join(sub.Topics, ",") != "digest" {
		t.Fatalf("stored: %+v %v", sub, err)
	}
	// topics_shown with nothing ticked is a refusal; neither field gives
	// the default topics.
	if resp, _ := post(url.Values{"email": {"none@example.com"}, "topics_shown": {"1"}}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("nothing ticked: %s", resp.Status)
	}
	if resp, _ := post(url.Values{"email": {"plain@example.com"}}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a form without topics: %s", resp.Status)
	}
	if sub, err := e.store.Get(t.Context(), "plain@example.com"); err != nil || strings.Join(sub.Topics, ",") != "digest,updates" {
		t.Fatalf("a form without topics gets the defaults: %+v %v", sub, err)
	}

	// A script's cross-origin JSON post starts with a preflight, which is
	// refused: the browser never sends the post.
	req, _ := http.NewRequest("OPTIONS", e.srv.URL+"/subscribe", nil)
	req.Header.Set("Origin", "https://blog.example.org")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type")
	pre, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pre.Body.Close()
	if pre.StatusCode != http.StatusMethodNotAllowed || pre.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight: %s %v", pre.Status, pre.Header)
	}
}
