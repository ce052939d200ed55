package api

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/store"
)

// leaveFormFields finds the unsubscribe form's action and the names of its
// inputs in a page, as a browser would post them.
var (
	leaveFormAction = regexp.MustCompile(`<form method="post" action="([^"]+)">`)
	leaveFormInput  = regexp.MustCompile(`<input [^>]*name="([^"]+)"`)
)

// TestUnsubscribeFormPage: GET /unsubscribe without a token is the
// unsubscribe form, a 200 HTML page with an address field that posts to
// POST /unsubscribe; posted from the page, as a browser does, it
// unsubscribes the address. A token that does not verify is still a 400.
func TestUnsubscribeFormPage(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false})
	e.post(t, "/subscribe", jsonCT, `{"email":"typed@example.com"}`)

	resp, body := e.get(t, "/unsubscribe")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /unsubscribe: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	// A browser posts a form of a no-referrer page with "Origin: null",
	// which the address path refuses unless Sec-Fetch-Site vouches for it.
	if rp := resp.Header.Get("Referrer-Policy"); rp == "no-referrer" {
		t.Errorf("Referrer-Policy %q: the form's post would name no origin", rp)
	}
	m := leaveFormAction.FindStringSubmatch(body)
	if m == nil || m[1] != "/unsubscribe" {
		t.Fatalf("no form posting to /unsubscribe:\n%s", body)
	}
	var names []string
	for _, in := range leaveFormInput.FindAllStringSubmatch(body, -1) {
		names = append(names, in[1])
	}
	if strings.Join(names, ",") != "email" || !strings.Contains(body, `type="email" required`) {
		t.Fatalf("the form's inputs are %q, want the one required address field:\n%s", names, body)
	}
	if !strings.Contains(body, "at once") {
		t.Errorf("the page does not say what happens in immediate mode:\n%s", body)
	}

	// The form, posted from the page.
	req, _ := http.NewRequest("POST", e.srv.URL+m[1], strings.NewReader(url.Values{"email": {"Typed@example.com"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.srv.URL)
	post, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = post.Body.Close()
	if post.StatusCode != http.StatusAccepted || e.status(t, "typed@example.com") != store.Unsubscribed {
		t.Fatalf("the form's post: %d, status %s", post.StatusCode, e.status(t, "typed@example.com"))
	}

	if resp, _ := e.get(t, "/unsubscribe?token=garbage"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a token that does not verify: %d", resp.StatusCode)
	}
}

// TestUnsubscribeFormPageConfirmMode: in confirm mode the form says that a
// link is mailed, not that mail stops at once.
func TestUnsubscribeFormPageConfirmMode(t *testing.T) {
	e := newEnv(t, Config{UnsubscribeByEmail: UnsubscribeConfirm})
	resp, body := e.get(t, "/unsubscribe")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "We mail a link") || strings.Contains(body, "at once") {
		t.Fatalf("GET /unsubscribe in confirm mode: %d\n%s", resp.StatusCode, body)
	}
}
