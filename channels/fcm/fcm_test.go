package fcm_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/fcm/fcmtest"
	"github.com/newsletter/newsletter/channels/webpush"
)

// A registration token of the usual shape.
const device = "dGVzdC1pbnN0YW5jZQ:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx_test_token_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

func setup(t *testing.T) (*fcmtest.Server, *fcm.Client) {
	t.Helper()
	srv := fcmtest.New(t)
	creds, err := fcm.LoadCredentials(srv.CredentialsFile)
	if err != nil {
		t.Fatal(err)
	}
	return srv, &fcm.Client{Creds: creds, BaseURL: srv.URL, HTTP: &http.Client{Timeout: time.Minute}}
}

// A message arrives with its notification, link and TTL, under an access
// token the fake issued after verifying the service account's JWT; later
// messages reuse the token.
func TestSend(t *testing.T) {
	srv, c := setup(t)
	ctx := context.Background()
	n := fcm.Notification{Title: "Issue 12", Body: "A new issue is out.", URL: "https://news.example.com/i/12"}
	if err := c.Send(ctx, device, n); err != nil {
		t.Fatal(err)
	}
	n.TTL = time.Hour
	for range 2 {
		if err := c.Send(ctx, device+"x", n); err != nil {
			t.Fatal(err)
		}
	}
	got := srv.WaitFor(t, 3)
	want := fcmtest.Message{Token: device, Title: "Issue 12", Body: "A new issue is out.",
		URL: "https://news.example.com/i/12", TTL: "86400s", AccessToken: got[0].AccessToken}
	if got[0] != want {
		t.Errorf("message\n got %+v\nwant %+v", got[0], want)
	}
	if got[1].TTL != "3600s" || got[1].Token != device+"x" {
		t.Errorf("second message %+v, want TTL 3600s to %sx", got[1], device)
	}
	if ex := srv.Exchanges(); ex != 1 {
		t.Errorf("%d token exchanges for 3 messages, want 1 (the token cached)", ex)
	}
}

// A burst of concurrent sends from a fresh client makes one exchange:
// the others wait for it rather than each fetching a token.
func TestConcurrentSendsShareOneExchange(t *testing.T) {
	srv, c := setup(t)
	const n = 30
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() { errs <- c.Send(context.Background(), device, fcm.Notification{Title: "t"}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := len(srv.Received()); got != n {
		t.Errorf("%d messages taken, want %d", got, n)
	}
	if ex := srv.Exchanges(); ex != 1 {
		t.Errorf("%d token exchanges, want 1", ex)
	}
}

// A token that expires within RefreshEarly is replaced before it is used:
// with tokens that short-lived, every send exchanges anew, and FCM never
// sees an expired one.
func TestTokenRefreshedBeforeExpiry(t *testing.T) {
	srv, c := setup(t)
	srv.TokenTTL(fcm.RefreshEarly - time.Minute)
	for range 2 {
		if err := c.Send(context.Background(), device, fcm.Notification{Title: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	if ex := srv.Exchanges(); ex != 2 {
		t.Errorf("%d exchanges for 2 sends with near-expired tokens, want 2", ex)
	}
	if got := srv.Received(); len(got) != 2 || got[0].AccessToken == got[1].AccessToken {
		t.Errorf("want 2 messages under 2 different tokens, got %+v", got)
	}
}

// A 401 (the token revoked) drops the cached token, fetches one fresh and
// retries the message once.
func TestUnauthorizedRefreshesOnce(t *testing.T) {
	srv, c := setup(t)
	ctx := context.Background()
	if err := c.Send(ctx, device, fcm.Notification{Title: "first"}); err != nil {
		t.Fatal(err)
	}
	srv.RevokeTokens()
	if err := c.Send(ctx, device, fcm.Notification{Title: "second"}); err != nil {
		t.Fatalf("send after revocation: %v", err)
	}
	if ex, sends := srv.Exchanges(), srv.Sends(); ex != 2 || sends != 3 {
		t.Errorf("%d exchanges and %d requests, want 2 and 3 (one refused, one retried)", ex, sends)
	}
	if got := srv.Received(); len(got) != 2 || got[1].Title != "second" {
		t.Errorf("received %+v", got)
	}
}

// Many sends refused at once with the same revoked token make one new
// exchange between them, and all get through.
func TestConcurrentUnauthorizedShareOneRefresh(t *testing.T) {
	srv, c := setup(t)
	if err := c.Send(context.Background(), device, fcm.Notification{Title: "warm"}); err != nil {
		t.Fatal(err)
	}
	srv.RevokeTokens()
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() { errs <- c.Send(context.Background(), device, fcm.Notification{Title: "t"}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if ex := srv.Exchanges(); ex != 2 {
		t.Errorf("%d exchanges, want 2 (the first and one refresh)", ex)
	}
	if got := len(srv.Received()); got != n+1 {
		t.Errorf("%d messages taken, want %d", got, n+1)
	}
}

// A token endpoint that is down makes the send ErrUnavailable (retry
// later), not a refusal; once it is back the send goes through.
func TestTokenEndpointUnavailable(t *testing.T) {
	srv, c := setup(t)
	srv.FailExchanges(1, http.StatusServiceUnavailable)
	err := c.Send(context.Background(), device, fcm.Notification{Title: "t"})
	if !errors.Is(err, webpush.ErrUnavailable) || webpush.Permanent(err) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if srv.Sends() != 0 {
		t.Error("a message was sent without an access token")
	}
	if err := c.Send(context.Background(), device, fcm.Notification{Title: "t"}); err != nil {
		t.Fatalf("send after the token endpoint recovered: %v", err)
	}
}

// A 401 that persists after the refresh is a refusal, after exactly one
// retry; THIRD_PARTY_AUTH_ERROR (the app's APNs key in Firebase) is no
// reason to refresh ours.
func TestUnauthorizedTwice(t *testing.T) {
	srv, c := setup(t)
	srv.Answer(device, http.StatusUnauthorized, "", "Request had invalid authentication credentials.")
	err := c.Send(context.Background(), device, fcm.Notification{Title: "t"})
	if !errors.Is(err, webpush.ErrRefused) || !webpush.Permanent(err) {
		t.Fatalf("err = %v, want ErrRefused", err)
	}
	if ex, sends := srv.Exchanges(), srv.Sends(); ex != 2 || sends != 2 {
		t.Errorf("%d exchanges and %d requests, want 2 and 2", ex, sends)
	}

	srv2, c2 := setup(t)
	srv2.Answer(device, http.StatusUnauthorized, "THIRD_PARTY_AUTH_ERROR", "APNs auth key missing")
	err = c2.Send(context.Background(), device, fcm.Notification{Title: "t"})
	var fe *fcm.Error
	if !errors.Is(err, webpush.ErrRefused) || !errors.As(err, &fe) || fe.Code != "THIRD_PARTY_AUTH_ERROR" {
		t.Fatalf("err = %v, want ErrRefused THIRD_PARTY_AUTH_ERROR", err)
	}
	if ex, sends := srv2.Exchanges(), srv2.Sends(); ex != 1 || sends != 1 {
		t.Errorf("%d exchanges and %d requests, want 1 and 1", ex, sends)
	}
}

// UNREGISTERED is ErrGone: the token is to be deleted.
func TestUnregistered(t *testing.T) {
	srv, c := setup(t)
	srv.Unregistered(device)
	err := c.Send(context.Background(), device, fcm.Notification{Title: "t"})
	var fe *fcm.Error
	if !errors.Is(err, webpush.ErrGone) || !webpush.Permanent(err) || !errors.As(err, &fe) || fe.Code != "UNREGISTERED" || fe.Status != 404 {
		t.Fatalf("err = %v, want ErrGone with UNREGISTERED", err)
	}
	if len(srv.Received()) != 0 {
		t.Error("a message to an unregistered token was taken")
	}
}

// Each of FCM's error codes lands in its class.
func TestErrorClasses(t *testing.T) {
	srv, c := setup(t)
	for _, tc := range []struct {
		status          int
		code, message   string
		want            error
		wantPermanent   bool
		wantCodeOfError string
	}{
		{400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token", webpush.ErrRefused, true, "INVALID_ARGUMENT"},
		{404, "", "Requested entity was not found.", webpush.ErrRefused, true, "NOT_FOUND"},
		{400, "INVALID_ARGUMENT", "Message is too big", webpush.ErrRefused, true, "INVALID_ARGUMENT"},
		{403, "SENDER_ID_MISMATCH", "SenderId mismatch", webpush.ErrRefused, true, "SENDER_ID_MISMATCH"},
		{429, "QUOTA_EXCEEDED", "Quota exceeded", webpush.ErrUnavailable, false, "QUOTA_EXCEEDED"},
		{500, "INTERNAL", "Internal error", webpush.ErrUnavailable, false, "INTERNAL"},
		{503, "", "Unavailable", webpush.ErrUnavailable, false, "UNAVAILABLE"},
		{409, "", "Conflict", webpush.ErrRefused, true, "ABORTED"},
	} {
		srv.Answer(device, tc.status, tc.code, tc.message)
		err := c.Send(context.Background(), device, fcm.Notification{Title: "t"})
		var fe *fcm.Error
		if !errors.Is(err, tc.want) || webpush.Permanent(err) != tc.wantPermanent || !errors.As(err, &fe) || fe.Code != tc.wantCodeOfError {
			t.Errorf("%d %s %q: err = %v (permanent %v), want %v with code %s", tc.status, tc.code, tc.message,
				err, webpush.Permanent(err), tc.want, tc.wantCodeOfError)
		}
	}
}

// Only an FcmError UNREGISTERED retires a token, as firebase-admin-go's
// IsUnregistered: a bare 404 (a wrong project answers it for every
// device) and a field violation on message.token are refusals.
func TestOnlyUnregisteredRetiresAToken(t *testing.T) {
	for _, resp := range []string{
		`{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND"}}`,
		`not json`,
		`{"error":{"code":400,"message":"Invalid value","status":"INVALID_ARGUMENT","details":[
		{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token","description":"Invalid registration token"}]}]}}`,
	} {
		status := 404
		if strings.Contains(resp, "INVALID_ARGUMENT") {
			status = 400
		}
		if err := fcm.ParseError(status, resp, ""); errors.Is(err, webpush.ErrGone) || !errors.Is(err, webpush.ErrRefused) {
			t.Errorf("%d %s: err = %v, want ErrRefused, not ErrGone", status, resp, err)
		}
	}
	gone := `{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND","details":[
		{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}`
	if err := fcm.ParseError(404, gone, ""); !errors.Is(err, webpush.ErrGone) {
		t.Errorf("UNREGISTERED: err = %v, want ErrGone", err)
	}
}

// 429 QUOTA_EXCEEDED and 503 carry their Retry-After, in seconds or as an
// HTTP date (firebase-admin-go's parseRetryAfterHeader reads both).
func TestThrottledRetryAfter(t *testing.T) {
	srv, c := setup(t)
	srv.Throttle(device, http.StatusTooManyRequests, "120")
	err := c.Send(context.Background(), device, fcm.Notification{Title: "t"})
	if !errors.Is(err, webpush.ErrUnavailable) || webpush.RetryAfter(err) != 2*time.Minute {
		t.Fatalf("429: err = %v, retry after %s; want ErrUnavailable after 2m", err, webpush.RetryAfter(err))
	}
	srv.Throttle(device, http.StatusServiceUnavailable, time.Now().Add(10*time.Minute).UTC().Format(http.TimeFormat))
	err = c.Send(context.Background(), device, fcm.Notification{Title: "t"})
	if got := webpush.RetryAfter(err); !errors.Is(err, webpush.ErrUnavailable) || got < 9*time.Minute || got > 10*time.Minute {
		t.Fatalf("503 with a date: err = %v, retry after %s; want about 10m", err, got)
	}
	srv.Clear(device)
	if err := c.Send(context.Background(), device, fcm.Notification{Title: "t"}); err != nil {
		t.Fatal(err)
	}
}

// A title and body too long for FCM's 4000 bytes are shortened on a
// character boundary with an ellipsis, and the message is taken; only a
// URL too long for any message is refused, before anything is sent.
func TestLongNotificationShortenedToFit(t *testing.T) {
	srv, c := setup(t)
	title, body := strings.Repeat("é", 3000), strings.Repeat("b", 5000)
	if err := c.Send(context.Background(), device, fcm.Notification{Title: title, Body: body, URL: "https://x.example/a"}); err != nil {
		t.Fatalf("a long notification: %v", err)
	}
	got := srv.Received()[0]
	if !utf8.ValidString(got.Title) || !strings.HasSuffix(got.Title, "…") || !strings.HasSuffix(got.Body, "…") || got.URL != "https://x.example/a" {
		t.Errorf("title %q… body %q…: want both cut on a character with an ellipsis, the url whole", got.Title[:10], got.Body[:10])
	}
	long := fcm.Notification{Title: "t", URL: "https://x.example/" + strings.Repeat("a", 5000)}
	if err := c.Send(context.Background(), device, long); !errors.Is(err, webpush.ErrTooLarge) || !webpush.Permanent(err) {
		t.Fatalf("a URL too long: %v, want ErrTooLarge", err)
	}
	if err := fcm.Fits(long); !errors.Is(err, webpush.ErrTooLarge) {
		t.Errorf("Fits: %v, want ErrTooLarge", err)
	}
	if srv.Sends() != 1 {
		t.Errorf("%d sends, want 1: a message that cannot fit is not sent", srv.Sends())
	}
}

// 503 with Retry-After is ErrUnavailable carrying the delay; the next send
// gets through.
func TestUnavailableRetryAfter(t *testing.T) {
	srv, c := setup(t)
	srv.Unavailable(1, "7")
	err := c.Send(context.Background(), device, fcm.Notification{Title: "t"})
	if !errors.Is(err, webpush.ErrUnavailable) || webpush.Permanent(err) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if got := webpush.RetryAfter(err); got != 7*time.Second {
		t.Errorf("RetryAfter = %s, want 7s", got)
	}
	if err := c.Send(context.Background(), device, fcm.Notification{Title: "t"}); err != nil {
		t.Fatalf("send after recovery: %v", err)
	}
	if len(srv.Received()) != 1 {
		t.Errorf("received %d, want 1", len(srv.Received()))
	}
}

// A slow FCM is given up on when the caller's context ends, and that is
// worth a retry.
func TestSlowFollowsContext(t *testing.T) {
	srv, c := setup(t)
	if err := c.Send(context.Background(), device, fcm.Notification{Title: "warm"}); err != nil {
		t.Fatal(err)
	}
	srv.Slow(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.Send(ctx, device, fcm.Notification{Title: "t"})
	if !errors.Is(err, context.DeadlineExceeded) || webpush.Permanent(err) {
		t.Fatalf("err = %v, want a deadline, not permanent", err)
	}
	srv.Slow(0)
}

// A key file whose key is not the account's: Google refuses the JWT, and
// the send is refused (no message goes out unauthenticated).
func TestWrongKey(t *testing.T) {
	srv := fcmtest.New(t)
	srv.ExpectRejections()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	path := rewriteKey(t, srv.CredentialsFile, other)
	creds, err := fcm.LoadCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	c := &fcm.Client{Creds: creds, BaseURL: srv.URL}
	err = c.Send(context.Background(), device, fcm.Notification{Title: "t"})
	var fe *fcm.Error
	if !errors.Is(err, webpush.ErrRefused) || !errors.As(err, &fe) || fe.Code != "invalid_grant" {
		t.Fatalf("err = %v, want ErrRefused invalid_grant", err)
	}
	if srv.Sends() != 0 || len(srv.Rejected()) != 1 || !strings.Contains(srv.Rejected()[0].Error(), "signature") {
		t.Errorf("sends %d, rejected %v: want no send and the signature refused", srv.Sends(), srv.Rejected())
	}
}

// rewriteKey copies a key file with its private_key replaced.
func rewriteKey(t *testing.T, path string, key any) string {
	t.Helper()
	var account map[string]string
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &account); err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	account["private_key"] = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	return writeJSON(t, account)
}

func writeJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A key file that lacks a field, has a key that does not parse or is not
// RSA, or is not a service account is refused, naming the problem.
func TestLoadCredentialsErrors(t *testing.T) {
	srv := fcmtest.New(t)
	b, err := os.ReadFile(srv.CredentialsFile)
	if err != nil {
		t.Fatal(err)
	}
	var good map[string]string
	if err := json.Unmarshal(b, &good); err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)})
	cases := map[string]struct {
		change func(map[string]string)
		want   string
	}{
		"no project":    {func(m map[string]string) { delete(m, "project_id") }, "project_id is missing"},
		"no key id":     {func(m map[string]string) { delete(m, "private_key_id") }, "private_key_id is missing"},
		"no key":        {func(m map[string]string) { delete(m, "private_key") }, "private_key is missing"},
		"no email":      {func(m map[string]string) { delete(m, "client_email") }, "client_email is missing"},
		"no token uri":  {func(m map[string]string) { delete(m, "token_uri") }, "token_uri is missing"},
		"bad token uri": {func(m map[string]string) { m["token_uri"] = "token" }, "not an http(s) URL"},
		"user account":  {func(m map[string]string) { m["type"] = "authorized_user" }, "want service_account"},
		"garbage key":   {func(m map[string]string) { m["private_key"] = "not a key" }, "no PEM block"},
		"EC key": {func(m map[string]string) {
			m["private_key"] = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}))
		}, "want an RSA key"},
		"PKCS#1 key":     {func(m map[string]string) { m["private_key"] = string(pkcs1) }, "want PRIVATE KEY (PKCS#8)"},
		"truncated key":  {func(m map[string]string) { m["private_key"] = m["private_key"][:200] + "\n-----END PRIVATE KEY-----\n" }, "private_key"},
		"corrupted body": {func(m map[string]string) { m["private_key"] = strings.Replace(m["private_key"], "MII", "XXX", 1) }, "not PKCS#8"},
	}
	for name, tc := range cases {
		m := map[string]string{}
		for k, v := range good {
			m[k] = v
		}
		tc.change(m)
		_, err := fcm.LoadCredentials(writeJSON(t, m))
		if !errors.Is(err, fcm.ErrCredentials) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrCredentials saying %q", name, err, tc.want)
		}
	}
	if _, err := fcm.LoadCredentials(filepath.Join(t.TempDir(), "absent.json")); !errors.Is(err, fcm.ErrCredentials) {
		t.Errorf("absent file: err = %v", err)
	}
	if _, err := fcm.ParseCredentials([]byte("{")); !errors.Is(err, fcm.ErrCredentials) {
		t.Errorf("bad JSON: err = %v", err)
	}
	var nilCreds fcm.Client
	if err := nilCreds.Send(context.Background(), device, fcm.Notification{Title: "t"}); !errors.Is(err, fcm.ErrCredentials) {
		t.Errorf("client without credentials: err = %v", err)
	}
}

func TestValidToken(t *testing.T) {
	for tok, ok := range map[string]bool{
		device:                    true,
		strings.Repeat("a", 32):   true,
		strings.Repeat("a", 1024): true,
		strings.Repeat("a", 31):   false,
		strings.Repeat("a", 1025): false,
		"":                        false,
		device[:60] + " " + "abc": false,
		device[:60] + "/+=":       false,
		device[:60] + "é":         false,
	} {
		err := fcm.ValidToken(tok)
		if (err == nil) != ok {
			t.Errorf("ValidToken(%.40q…) = %v, want ok %v", tok, err, ok)
		}
		if err != nil && (!errors.Is(err, fcm.ErrBadToken) || !errors.Is(err, webpush.ErrGone)) {
			t.Errorf("ValidToken error %v is not ErrBadToken/ErrGone", err)
		}
	}
	srv, c := setup(t)
	if err := c.Send(context.Background(), "short", fcm.Notification{Title: "t"}); !errors.Is(err, fcm.ErrBadToken) {
		t.Errorf("send to a malformed token: %v", err)
	}
	if srv.Sends() != 0 {
		t.Error("a malformed token was sent to FCM")
	}
}

// A broken or hostile FCM's long error message is cut to 512 bytes (on a
// character) before it reaches an error, a log or the task queue.
func TestErrorMessageIsBounded(t *testing.T) {
	long := strings.Repeat("é", 20000)
	for _, body := range []string{`{"error":{"code":500,"message":"` + long + `","status":"INTERNAL"}}`, long} {
		err := fcm.ParseError(500, body, "")
		if n := len(err.Error()); n > 700 || !utf8.ValidString(err.Error()) {
			t.Errorf("an error of %d bytes (valid UTF-8: %v), want at most about 512 of FCM's message", n, utf8.ValidString(err.Error()))
		}
	}
}
