package api

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
)

// tokenRequest is one request to a page that carries a token.
type tokenRequest struct {
	name, method, path, body string
	origin                   string // Origin header of a form post ("" : none)
}

func (e *env) do(t *testing.T, c tokenRequest) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(c.method, e.srv.URL+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.method == http.MethodPost {
		req.Header.Set("Content-Type", formCT)
	}
	if c.origin != "" {
		req.Header.Set("Origin", c.origin)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// tokenRequests are the requests of every page that carries a token, GET
// and POST, good and bad tokens alike, for an active a@x.io and a
// pending p@x.io. The unsubscribes come last.
func tokenRequests(t *testing.T, e *env, origin string) []tokenRequest {
	q := url.QueryEscape
	confirm, prefs := e.sign(t, token.Confirm, "p@x.io"), e.sign(t, token.Preferences, "a@x.io")
	unsub, topic := e.sign(t, token.Unsubscribe, "a@x.io"), e.signTopic(t, token.Unsubscribe, "a@x.io", "updates")
	return []tokenRequest{
		{name: "confirm page", method: "GET", path: "/confirm?token=" + q(confirm)},
		{name: "confirm page, bad token", method: "GET", path: "/confirm?token=nope"},
		{name: "confirm page, HEAD", method: "HEAD", path: "/confirm?token=" + q(confirm)},
		{name: "confirm", method: "POST", path: "/confirm", body: "token=" + q(confirm)},
		{name: "confirm, bad token", method: "POST", path: "/confirm", body: "token=nope"},
		{name: "preferences page", method: "GET", path: "/preferences?token=" + q(prefs)},
		{name: "preferences page, bad token", method: "GET", path: "/preferences?token=nope"},
		{name: "preferences saved", method: "POST", path: "/preferences", origin: origin, body: "token=" + q(prefs) + "&topics=digest&topics=updates"},
		{name: "preferences refused", method: "POST", path: "/preferences", origin: origin, body: "token=" + q(prefs) + "&timezone=Mars/Olympus"},
		{name: "preferences, bad token", method: "POST", path: "/preferences", origin: origin, body: "token=nope"},
		{name: "unsubscribe page", method: "GET", path: "/unsubscribe?token=" + q(unsub)},
		{name: "unsubscribe page, bad token", method: "GET", path: "/unsubscribe?token=nope"},
		{name: "unsubscribe, bad token", method: "POST", path: "/unsubscribe?token=nope", body: "List-Unsubscribe=One-Click"},
		{name: "one-click of a topic", method: "POST", path: "/unsubscribe?token=" + q(topic), body: "List-Unsubscribe=One-Click"},
		{name: "the page's button", method: "POST", path: "/unsubscribe", body: "token=" + q(unsub)},
	}
}

// TestTokenPagesHeaders: every answer of a page with a token in its URL
// or form tells the browser to send no Referer (its links and resources
// would carry the token elsewhere), and, when the service is on https,
// to come back on https only.
func TestTokenPagesHeaders(t *testing.T) {
	for _, origin := range []string{"https://news.example.com", "http://localhost:8080"} {
		e := newEnv(t, Config{DoubleOptIn: true, Origin: origin})
		ctx := context.Background()
		for _, email := range []string{"a@x.io", "p@x.io"} {
			if resp, body := e.post(t, "/subscribe", jsonCT, `{"email":"`+email+`"}`); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
		}
		if _, err := e.store.Confirm(ctx, "a@x.io", outbox.Entry{}); err != nil {
			t.Fatal(err)
		}
		wantHSTS := ""
		if strings.HasPrefix(origin, "https:") {
			wantHSTS = "max-age=31536000"
		}
		codes := map[int]bool{}
		for _, c := range tokenRequests(t, e, origin) {
			resp, body := e.do(t, c)
			codes[resp.StatusCode] = true
			if got := resp.Header.Get("Referrer-Policy"); got != "no-referrer" {
				t.Errorf("%s (%s): %d, Referrer-Policy %q, want no-referrer\n%.300s", c.name, origin, resp.StatusCode, got, body)
			}
			if got := resp.Header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("%s (%s): Cache-Control %q, want no-store (the page names a person)", c.name, origin, got)
			}
			if got := resp.Header.Get("Strict-Transport-Security"); got != wantHSTS {
				t.Errorf("%s (%s): Strict-Transport-Security %q, want %q", c.name, origin, got, wantHSTS)
			}
		}
		// The requests did what they say: the headers are on answers of
		// every kind, not only on refusals.
		if !codes[200] || !codes[202] || !codes[400] {
			t.Fatalf("%s: answers %v, want 200, 202 and 400 among them", origin, codes)
		}
		if e.status(t, "p@x.io") != store.Active || e.status(t, "a@x.io") != store.Unsubscribed {
			t.Fatalf("%s: the requests did not confirm and unsubscribe", origin)
		}
	}
}

// Links as mails sent before tokens named subscribers by id carry them (secret
// "0123456789abcdef", address zoe@example.com): mails already in inboxes
// carry them, and their one-click must keep working.
const (
	legacyUnsubscribeDigest = "dW5zdWJzY3JpYmUKem9lQGV4YW1wbGUuY29tCjAKZGlnZXN0.7-Nc__rr6gutEnH8vdmljvaajnnJE-ddhea5QwLl9-4"
	legacyUnsubscribe       = "dW5zdWJzY3JpYmUKem9lQGV4YW1wbGUuY29tCjA.YDZoFQUK1JyyYO_vIFto-KlZuaCYad9FIY307V2P9Vo"
	legacyPreferences       = "cHJlZmVyZW5jZXMKem9lQGV4YW1wbGUuY29tCjA.dXzdesJWzRHsL4wFZCqXVG81UMcTbaOWDZvi5v4a_fo"
)

// TestLegacyLinksStillWork: the unsubscribe links of mails sent before
// ids (the address inside the token) still open their pages and still
// one-click, topic links leaving their topic only; their preferences
// links, which had no expiry, are expired.
func TestLegacyLinksStillWork(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false, Topics: threeTopics(t), Origin: "https://news.example.com"})
	ctx := context.Background()
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"zoe@example.com","topics":["digest","updates"]}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	// A preferences link without an expiry is expired now
	// (token.PreferencesTTL): its page says so and opens nothing.
	if resp, page := e.get(t, "/preferences?token="+url.QueryEscape(legacyPreferences)); resp.StatusCode != 400 || !strings.Contains(page, "This link has expired") || strings.Contains(page, "zoe") {
		t.Fatalf("legacy preferences link: %d\n%s", resp.StatusCode, page)
	}
	if resp, page := e.get(t, "/unsubscribe?token="+url.QueryEscape(legacyUnsubscribeDigest)); resp.StatusCode != 200 || !strings.Contains(page, "Weekly digest") {
		t.Fatalf("legacy unsubscribe page: %d\n%s", resp.StatusCode, page)
	}
	e.oneClick(t, legacyUnsubscribeDigest)
	if sub, _ := e.store.Get(ctx, "zoe@example.com"); sub.Status != store.Active || !slices.Equal(sub.Topics, []string{"updates"}) {
		t.Fatalf("after the legacy digest one-click: %+v", sub)
	}
	e.oneClick(t, legacyUnsubscribe)
	if e.status(t, "zoe@example.com") != store.Unsubscribed {
		t.Fatal("the legacy one-click did not unsubscribe")
	}
	// Strict all the same: a changed last character is refused.
	for _, forged := range sameBytesSpellings(legacyPreferences) {
		if resp, _ := e.get(t, "/preferences?token="+url.QueryEscape(forged)); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("a changed legacy link: %d, want 400", resp.StatusCode)
		}
	}
}

// TestTamperedLinkRefused: a one-click link whose last character was
// changed to one that a lenient decoder reads as the same bytes does not
// unsubscribe.
func TestTamperedLinkRefused(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false})
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"t@x.io"}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	tok := e.sign(t, token.Unsubscribe, "t@x.io")
	for _, forged := range sameBytesSpellings(tok) {
		resp, _ := e.post(t, "/unsubscribe?token="+url.QueryEscape(forged), formCT, "List-Unsubscribe=One-Click")
		if resp.StatusCode != http.StatusBadRequest || e.status(t, "t@x.io") != store.Active {
			t.Fatalf("%s (a changed %s): %d, status %s", forged, tok, resp.StatusCode, e.status(t, "t@x.io"))
		}
	}
	e.oneClick(t, tok)
	if e.status(t, "t@x.io") != store.Unsubscribed {
		t.Fatal("the real link did not unsubscribe")
	}
}

// sameBytesSpellings are tok with its last character changed only in the
// bits base64 leaves unused (a 32-byte MAC ends in 4 data bits and 2
// unused ones): three other spellings of the same bytes.
func sameBytesSpellings(tok string) []string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, tok[len(tok)-1])
	var out []string
	for low := 0; low < 4; low++ {
		if c := last&^3 | low; c != last {
			out = append(out, tok[:len(tok)-1]+string(alphabet[c]))
		}
	}
	return out
}

// TestPreferencesPostUnderNoReferrer: the preference centre is served with
// Referrer-Policy: no-referrer, so a browser posts its form with
// "Origin: null" and no Referer, and says where the post comes from in
// Sec-Fetch-Site. Our own page's post is taken; another site's is not.
func TestPreferencesPostUnderNoReferrer(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: false, Origin: "https://news.example.com"})
	if resp, _ := e.post(t, "/subscribe", jsonCT, `{"email":"n@x.io"}`); resp.StatusCode != 202 {
		t.Fatal(resp.StatusCode)
	}
	body := url.Values{"token": {e.sign(t, token.Preferences, "n@x.io")}, "topics": {"digest"}, "name": {"Nia"}}.Encode()
	post := func(headers map[string]string) int {
		req, _ := http.NewRequest("POST", e.srv.URL+"/preferences", strings.NewReader(body))
		req.Header.Set("Content-Type", formCT)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for _, refused := range []map[string]string{
		{"Origin": "null"},
		{"Origin": "null", "Sec-Fetch-Site": "cross-site"},
		{"Origin": "null", "Sec-Fetch-Site": "same-site"},
		{"Origin": "https://news.example.com", "Sec-Fetch-Site": "cross-site"},
		{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
	} {
		if code := post(refused); code != http.StatusForbidden {
			t.Fatalf("%v: %d, want 403", refused, code)
		}
	}
	if sub, _ := e.store.Get(context.Background(), "n@x.io"); sub.Name != "" {
		t.Fatalf("a refused post saved %+v", sub)
	}
	if code := post(map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"}); code != http.StatusSeeOther {
		t.Fatalf("our own page's post under no-referrer: %d, want 303 (back to the page)", code)
	}
	if sub, _ := e.store.Get(context.Background(), "n@x.io"); sub.Name != "Nia" {
		t.Fatalf("the post was not saved: %+v", sub)
	}
}

// TestLinkOfSubscriberNoLongerListed: a link whose id is not on the list
// (nothing issues one, but a list can be cleared) changes nothing and
// says so; one-click still answers 200 as RFC 8058 wants.
func TestLinkOfSubscriberNoLongerListed(t *testing.T) {
	e := newEnv(t, Config{DoubleOptIn: true, Origin: "https://news.example.com"})
	q := func(p token.Purpose) string { return url.QueryEscape(e.signer.Sign(p, 4242)) }
	if resp, body := e.get(t, "/confirm?token="+q(token.Confirm)); resp.StatusCode != 400 || !strings.Contains(body, "no longer valid") {
		t.Fatalf("confirm page: %d %s", resp.StatusCode, body)
	}
	if resp, body := e.get(t, "/preferences?token="+q(token.Preferences)); resp.StatusCode != 200 || !strings.Contains(body, "You are not subscribed") {
		t.Fatalf("preferences page: %d %s", resp.StatusCode, body)
	}
	if resp, body := e.get(t, "/unsubscribe?token="+q(token.Unsubscribe)); resp.StatusCode != 200 || !strings.Contains(body, "You are not subscribed") {
		t.Fatalf("unsubscribe page: %d %s", resp.StatusCode, body)
	}
	if resp, body := e.post(t, "/unsubscribe?token="+q(token.Unsubscribe), formCT, "List-Unsubscribe=One-Click"); resp.StatusCode != 200 {
		t.Fatalf("one-click: %d %s", resp.StatusCode, body)
	}
}
