package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/store"
)

// A browser's subscription: RFC 8291's example keys (a point on P-256, a
// 16-byte secret) at a public literal address, which needs no DNS.
const (
	testP256DH   = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
	testAuth     = "BTBZMqHH6r4Tts7J_aSIgg"
	testEndpoint = "https://93.184.215.14/push/v2/abc"
)

func pushSub(endpoint, p256dh, auth string) map[string]any {
	return map[string]any{"endpoint": endpoint, "expirationTime": nil, "keys": map[string]string{"p256dh": p256dh, "auth": auth}}
}

func pushEnv(t *testing.T) (*env, string) {
	t.Helper()
	pub, _, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, Config{DoubleOptIn: true, VAPIDPublicKey: pub}), pub
}

// postPush posts body to /preferences/push as our own page's script does.
func (e *env) postPush(t *testing.T, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/preferences/push", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Origin", e.srv.URL)
	if contentType == "application/json" {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func jsonBody(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func activeSubscriber(t *testing.T, e *env, email string) store.Subscriber {
	t.Helper()
	sub, err := e.store.Subscribe(context.Background(), store.SubscribeRequest{Email: email, Activate: true})
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

func (e *env) browsers(t *testing.T, id int64) []store.PushSubscription {
	t.Helper()
	got, err := e.store.PushSubscriptions(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// The script's JSON body, the same with the subscription as a string, and
// a plain form all store the browser and answer 201.
func TestPushSubscribeStores(t *testing.T) {
	e, _ := pushEnv(t)
	sub := activeSubscriber(t, e, "push@example.com")
	tok := e.sign(t, token.Preferences, "push@example.com")

	code, body := e.postPush(t, "application/json", jsonBody(t, map[string]any{"token": tok, "subscription": pushSub(testEndpoint, testP256DH, testAuth)}))
	if code != http.StatusCreated {
		t.Fatalf("JSON body: %d %s", code, body)
	}
	got := e.browsers(t, sub.ID)
	if len(got) != 1 || got[0].Endpoint != testEndpoint || base64.RawURLEncoding.EncodeToString(got[0].P256DH) != testP256DH ||
		base64.RawURLEncoding.EncodeToString(got[0].Auth) != testAuth {
		t.Fatalf("stored %+v", got)
	}
	asString := jsonBody(t, pushSub(testEndpoint+"2", testP256DH, testAuth))
	if code, body := e.postPush(t, "application/json", jsonBody(t, map[string]any{"token": tok, "subscription": asString})); code != http.StatusCreated {
		t.Fatalf("subscription as a JSON string: %d %s", code, body)
	}
	form := url.Values{"token": {tok}, "subscription": {jsonBody(t, pushSub(testEndpoint+"3", testP256DH, testAuth))}}
	if code, body := e.postPush(t, "application/x-www-form-urlencoded", form.Encode()); code != http.StatusCreated {
		t.Fatalf("form: %d %s", code, body)
	}
	if n := len(e.browsers(t, sub.ID)); n != 3 {
		t.Fatalf("%d browsers stored, want 3", n)
	}
}

// Every bad subscription is a 400 that says what is wrong, and nothing is
// stored; a token that is not a preferences token, a post from another
// site and a person who is not subscribed are refused too.
func TestPushSubscribeRefusesBadInput(t *testing.T) {
	e, _ := pushEnv(t)
	sub := activeSubscriber(t, e, "push@example.com")
	tok := e.sign(t, token.Preferences, "push@example.com")
	raw, _ := base64.RawURLEncoding.DecodeString(testP256DH)
	enc := base64.RawURLEncoding.EncodeToString
	offCurve := make([]byte, 65)
	offCurve[0], offCurve[64] = 4, 1
	for name, tc := range map[string]struct {
		body, want string
	}{
		"body not JSON":         {`{"token":`, "unreadable body"},
		"an unknown field":      {jsonBody(t, map[string]any{"token": tok, "subscription": pushSub(testEndpoint, testP256DH, testAuth), "user": "x"}), "unknown field"},
		"subscription a number": {`{"token":"` + tok + `","subscription":7}`, "must be a JSON object"},
		"subscription not JSON": {jsonBody(t, map[string]any{"token": tok, "subscription": "{endpoint"}), "bad push subscription"},
		"no subscription":       {jsonBody(t, map[string]any{"token": tok}), "bad push subscription"},
		"p256dh 64 bytes":       {jsonBody(t, map[string]any{"token": tok, "subscription": pushSub(testEndpoint, enc(raw[:64]), testAuth)}), "keys.p256dh is 64 bytes"},
		"p256dh compressed":     {jsonBody(t, map[string]any{"token": tok, "subscription": pushSub(testEndpoint, enc(append([]byte{2}, raw[1:33]...)), testAuth)}), "keys.p256dh is 33 bytes"},
		"p256dh off the curve":  {jsonBody(t, map[string]any{"token": tok, "subscription": pushSub(testEndpoint, enc(offCurve), testAuth)}), "not a point on P-256"},
		"auth 15 bytes":         {jsonBody(t, map[string]any{"token": tok, "subscription": pushSub(testEndpoint, testP256DH, enc(make([]byte, 15)))}), "keys.auth is 15 bytes"},
		"auth missing":          {jsonBody(t, map[string]any{"token": tok, "subscription": pushSub(testEndpoint, testP256DH, "")}), "keys.auth"},
		"http endpoint":         {jsonBody(t, map[string]any{"token": tok, "subscription": pushSub("http://93.184.215.14/push", testP256DH, testAuth)}), "https://"},
		"loopback endpoint":     {jsonBody(t, map[string]any{"token": tok, "subscription": pushSub("https://127.0.0.1:8443/push", testP256DH, testAuth)}), "not public"},
		"private endpoint":      {jsonBody(t, map[string]any{"token": tok, "subscription": pushSub("https://10.1.2.3/push", testP256DH, testAuth)}), "not public"},
		"link-local endpoint":   {jsonBody(t, map[string]any{"token": tok, "subscription": pushSub("https://169.254.169.254/latest", testP256DH, testAuth)}), "not public"},
		"localhost endpoint":    {jsonBody(t, map[string]any{"token": tok, "subscription": pushSub("https://localhost/push", testP256DH, testAuth)}), "not public"},
		"relative endpoint":     {jsonBody(t, map[string]any{"token": tok, "subscription": pushSub("/push", testP256DH, testAuth)}), "https"},
		"confirm token":         {jsonBody(t, map[string]any{"token": e.sign(t, token.Confirm, "push@example.com"), "subscription": pushSub(testEndpoint, testP256DH, testAuth)}), "not valid"},
	} {
		code, body := e.postPush(t, "application/json", tc.body)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", name, code, body, tc.want)
		}
	}
	if got := e.browsers(t, sub.ID); len(got) != 0 {
		t.Fatalf("bad input stored %+v", got)
	}

	// Another site's page posting a stolen token.
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/preferences/push", strings.NewReader(url.Values{
		"token": {tok}, "subscription": {jsonBody(t, pushSub(testEndpoint, testP256DH, testAuth))}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(e.browsers(t, sub.ID)) != 0 {
		t.Fatalf("cross-site post: %d, stored %d", resp.StatusCode, len(e.browsers(t, sub.ID)))
	}

	// A post naming no page at all (no Sec-Fetch-Site, Origin or
	// Referer) is no browser on our page, JSON or not: only our script
	// posts here.
	for _, ct := range []string{"application/json", "application/x-www-form-urlencoded"} {
		body := jsonBody(t, map[string]any{"token": tok, "subscription": pushSub(testEndpoint, testP256DH, testAuth)})
		if ct != "application/json" {
			body = url.Values{"token": {tok}, "subscription": {jsonBody(t, pushSub(testEndpoint, testP256DH, testAuth))}}.Encode()
		}
		resp, err := noRedirect.Post(e.srv.URL+"/preferences/push", ct, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || len(e.browsers(t, sub.ID)) != 0 {
			t.Fatalf("%s post naming no page: %d, stored %d", ct, resp.StatusCode, len(e.browsers(t, sub.ID)))
		}
	}

	// Someone who is not (or no longer) subscribed has nothing to notify.
	pending, err := e.store.Subscribe(context.Background(), store.SubscribeRequest{Email: "pending@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	code, body := e.postPush(t, "application/json", jsonBody(t, map[string]any{"token": e.sign(t, token.Preferences, "pending@example.com"),
		"subscription": pushSub(testEndpoint, testP256DH, testAuth)}))
	if code != http.StatusConflict || len(e.browsers(t, pending.ID)) != 0 {
		t.Fatalf("pending subscriber: %d %s", code, body)
	}
}

// With NEWSLETTER_WEBHOOK_ALLOW_PRIVATE (tests, development) a loopback
// http endpoint is taken.
func TestPushSubscribeAllowPrivate(t *testing.T) {
	pub, _, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		guard netguard.Guard
		want  int
	}{{netguard.Guard{}, http.StatusBadRequest}, {allowPrivate, http.StatusCreated}} {
		e := newEnv(t, Config{VAPIDPublicKey: pub, Endpoints: tc.guard}) // each on an emptied database
		activeSubscriber(t, e, "dev@example.com")
		code, body := e.postPush(t, "application/json", jsonBody(t, map[string]any{"token": e.sign(t, token.Preferences, "dev@example.com"),
			"subscription": pushSub("http://127.0.0.1:9999/push/1", testP256DH, testAuth)}))
		if code != tc.want {
			t.Fatalf("allow private %v: %d %s, want %d", tc.guard.AllowPrivate, code, body, tc.want)
		}
	}
}

// The preference centre and the page after confirming offer web push: a
// block hidden until the script finds the Push API, the script allowed by
// the page's CSP; the forms stay as they were without it.
func TestPushOffered(t *testing.T) {
	e, pub := pushEnv(t)
	activeSubscriber(t, e, "push@example.com")
	tok := e.sign(t, token.Preferences, "push@example.com")
	resp, page := e.get(t, "/preferences?token="+url.QueryEscape(tok))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("preferences page: %d", resp.StatusCode)
	}
	block := regexp.MustCompile(`<section id="push" class="push" hidden data-key="([^"]+)" data-token="([^"]+)">`).FindStringSubmatch(page)
	if block == nil || block[1] != pub || block[2] != tok {
		t.Fatalf("no hidden push block with the key and token in:\n%s", page)
	}
	if !strings.Contains(page, `<script src="/push.js" defer></script>`) || !strings.Contains(page, `<form method="post" action="/preferences">`) {
		t.Fatalf("script or form missing:\n%s", page)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, d := range []string{"script-src 'self'", "connect-src 'self'", "worker-src 'self'", "default-src 'none'"} {
		if !strings.Contains(csp, d) {
			t.Errorf("CSP %q lacks %s", csp, d)
		}
	}

	// After confirming: the offer, with a preferences token of that person.
	if _, err := e.store.Subscribe(context.Background(), store.SubscribeRequest{Email: "new@example.com"}); err != nil {
		t.Fatal(err)
	}
	_, page = e.post(t, "/confirm", "application/x-www-form-urlencoded", "token="+url.QueryEscape(e.sign(t, token.Confirm, "new@example.com")))
	block = regexp.MustCompile(`data-token="([^"]+)"`).FindStringSubmatch(page)
	if !strings.Contains(page, "Subscription confirmed") || block == nil {
		t.Fatalf("confirmed page without the offer:\n%s", page)
	}
	newcomer, err := e.store.Get(context.Background(), "new@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if who, err := e.signer.Verify(token.Preferences, block[1]); err != nil || who.ID != newcomer.ID {
		t.Fatalf("the offer's token names %+v (%v), want subscriber %d", who, err, newcomer.ID)
	}
}

// TestUsedConfirmLinkActsForNobody: the confirmation link posted again,
// once it was used (it may sit in an old or forwarded mail), shows a
// plain "already confirmed" page: no push offer, no token of the person,
// nothing that opens their preferences, export or erase.
func TestUsedConfirmLinkActsForNobody(t *testing.T) {
	e, _ := pushEnv(t)
	if _, err := e.store.Subscribe(context.Background(), store.SubscribeRequest{Email: "new@example.com"}); err != nil {
		t.Fatal(err)
	}
	link := "token=" + url.QueryEscape(e.sign(t, token.Confirm, "new@example.com"))
	if resp, page := e.post(t, "/confirm", "application/x-www-form-urlencoded", link); resp.StatusCode != http.StatusOK || !strings.Contains(page, "Subscription confirmed") {
		t.Fatalf("first use: %d\n%s", resp.StatusCode, page)
	}
	resp, page := e.post(t, "/confirm", "application/x-www-form-urlencoded", link)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Already confirmed") {
		t.Fatalf("second use: %d\n%s", resp.StatusCode, page)
	}
	if strings.Contains(page, "data-token") || strings.Contains(page, `id="push"`) || strings.Contains(page, "/preferences") {
		t.Fatalf("a used link's page carries something that acts for the person:\n%s", page)
	}
}

// Without VAPID keys nothing of web push exists: no routes, no offer, no
// script allowed.
func TestPushOff(t *testing.T) {
	e := newEnv(t, Config{})
	activeSubscriber(t, e, "push@example.com")
	tok := e.sign(t, token.Preferences, "push@example.com")
	resp, page := e.get(t, "/preferences?token="+url.QueryEscape(tok))
	if strings.Contains(page, `id="push"`) || strings.Contains(page, "<script") || strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src") {
		t.Fatalf("web push offered while off:\n%s", page)
	}
	for _, path := range []string{"/sw.js", "/push.js"} {
		if resp, _ := e.get(t, path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
	if code, _ := e.postPush(t, "application/json", jsonBody(t, map[string]any{"token": tok, "subscription": pushSub(testEndpoint, testP256DH, testAuth)})); code != http.StatusNotFound {
		t.Fatalf("POST /preferences/push while off: %d, want 404", code)
	}
}

// The service worker is served as a script that may control the site,
// shows a push and opens its link on click.
func TestServiceWorker(t *testing.T) {
	e, _ := pushEnv(t)
	resp, body := e.get(t, "/sw.js")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/javascript; charset=utf-8" ||
		resp.Header.Get("Service-Worker-Allowed") != "/" {
		t.Fatalf("GET /sw.js: %d %v", resp.StatusCode, resp.Header)
	}
	for _, s := range []string{"addEventListener('push'", "showNotification(", "addEventListener('notificationclick'", "openWindow("} {
		if !strings.Contains(body, s) {
			t.Errorf("sw.js lacks %s", s)
		}
	}
	resp, body = e.get(t, "/push.js")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") ||
		!strings.Contains(body, "applicationServerKey") || !strings.Contains(body, "'/preferences/push'") {
		t.Fatalf("GET /push.js: %d %v", resp.StatusCode, resp.Header)
	}
}

var allowPrivate = netguard.Guard{AllowPrivate: true}
