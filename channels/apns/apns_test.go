package apns_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/apns/apnstest"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/testkit/crowd"
)

// A device token of today's length (32 bytes).
const device = "8f2c1e0a9b7d6c5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e"

// clock is a settable time shared by the client and the server.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func setup(t *testing.T) (*apnstest.Server, *apns.Client, *clock) {
	t.Helper()
	srv := apnstest.New(t)
	key, err := apns.LoadKey(srv.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now().Truncate(time.Second)}
	srv.SetClock(clk.now)
	c := &apns.Client{Key: key, KeyID: apnstest.KeyID, TeamID: apnstest.TeamID, Topic: apnstest.Topic,
		BaseURL: srv.URL, HTTP: apns.NewHTTPClient(srv.RootCAs())}
	c.SetClock(clk.now)
	return srv, c, clk
}

// A notification arrives over HTTP/2 with its alert, link and headers,
// under a provider token that verifies.
func TestSend(t *testing.T) {
	srv, c, clk := setup(t)
	n := apns.Notification{Title: "Issue 12", Body: "A new issue is out.", URL: "https://news.example.com/i/12"}
	if err := c.Send(context.Background(), device, n); err != nil {
		t.Fatal(err)
	}
	n.TTL = time.Hour
	if err := c.Send(context.Background(), device, n); err != nil {
		t.Fatal(err)
	}
	got := srv.WaitFor(t, 2)
	want := apnstest.Message{DeviceToken: device, Title: "Issue 12", Body: "A new issue is out.",
		URL: "https://news.example.com/i/12", Topic: apnstest.Topic, PushType: "alert", Priority: "10",
		Expiration: strconv.FormatInt(clk.now().Add(webpush.DefaultTTL).Unix(), 10), ProviderToken: got[0].ProviderToken}
	if got[0] != want {
		t.Errorf("message\n got %+v\nwant %+v", got[0], want)
	}
	if exp := strconv.FormatInt(clk.now().Add(time.Hour).Unix(), 10); got[1].Expiration != exp {
		t.Errorf("apns-expiration %s with a TTL of an hour, want %s", got[1].Expiration, exp)
	}
	if srv.ProviderTokens() != 1 {
		t.Errorf("%d provider tokens for 2 sends, want 1", srv.ProviderTokens())
	}
}

// The provider token is reused for TokenRefresh and replaced after, well
// inside Apple's hour and no more often than Apple allows.
func TestProviderTokenRefresh(t *testing.T) {
	srv, c, clk := setup(t)
	send := func() {
		t.Helper()
		if err := c.Send(context.Background(), device, apns.Notification{Title: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	send()
	clk.advance(apns.TokenRefresh - time.Minute)
	send()
	if n := srv.ProviderTokens(); n != 1 {
		t.Fatalf("%d provider tokens before TokenRefresh, want 1", n)
	}
	clk.advance(time.Minute)
	send()
	if n := srv.ProviderTokens(); n != 2 {
		t.Fatalf("%d provider tokens after TokenRefresh, want 2", n)
	}
	if apns.TokenRefresh <= 20*time.Minute || apns.TokenRefresh >= time.Hour {
		t.Errorf("TokenRefresh %s: want between Apple's 20 minutes and an hour", apns.TokenRefresh)
	}
}

// 403 ExpiredProviderToken to a token at least 20 minutes old signs a new
// token and retries once.
func TestExpiredProviderTokenRefreshesOnce(t *testing.T) {
	srv, c, clk := setup(t)
	if err := c.Send(context.Background(), device, apns.Notification{Title: "first"}); err != nil {
		t.Fatal(err)
	}
	clk.advance(apns.TokenMinAge)
	srv.ExpireProviderTokens()
	if err := c.Send(context.Background(), device, apns.Notification{Title: "second"}); err != nil {
		t.Fatalf("send after the token expired: %v", err)
	}
	if n, reqs := srv.ProviderTokens(), srv.Requests(); n != 2 || reqs != 3 {
		t.Errorf("%d provider tokens and %d requests, want 2 and 3", n, reqs)
	}
	if got := srv.Received(); len(got) != 2 || got[1].Title != "second" {
		t.Errorf("received %+v", got)
	}
}

// ExpiredProviderToken to a token under 20 minutes old mints none (Apple
// would answer TooManyProviderTokenUpdates): the send is a pause,
// retried once the token may be replaced; then one new token goes.
func TestExpiredYoungTokenPauses(t *testing.T) {
	srv, c, clk := setup(t)
	if err := c.Send(context.Background(), device, apns.Notification{Title: "first"}); err != nil {
		t.Fatal(err)
	}
	clk.advance(5 * time.Minute)
	srv.ExpireProviderTokens()
	err := c.Send(context.Background(), device, apns.Notification{Title: "second"})
	if !errors.Is(err, webpush.ErrUnavailable) || webpush.Permanent(err) || webpush.RetryAfter(err) != apns.TokenMinAge-5*time.Minute {
		t.Fatalf("err = %v (retry after %s), want ErrUnavailable after 15m", err, webpush.RetryAfter(err))
	}
	if n, reqs, many := srv.ProviderTokens(), srv.Requests(), srv.TooManyUpdates(); n != 1 || reqs != 2 || many != 0 {
		t.Fatalf("%d provider tokens, %d requests, %d TooManyProviderTokenUpdates; want 1, 2, 0", n, reqs, many)
	}
	clk.advance(webpush.RetryAfter(err))
	if err := c.Send(context.Background(), device, apns.Notification{Title: "second"}); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if n, many := srv.ProviderTokens(), srv.TooManyUpdates(); n != 2 || many != 0 {
		t.Errorf("%d provider tokens, %d TooManyProviderTokenUpdates; want 2 and 0", n, many)
	}
}

// Sends refused at once for the same expired token sign one new token
// between them (Apple counts token updates), and all get through.
func TestConcurrentExpiredShareOneNewToken(t *testing.T) {
	srv, c, clk := setup(t)
	if err := c.Send(context.Background(), device, apns.Notification{Title: "warm"}); err != nil {
		t.Fatal(err)
	}
	clk.advance(apns.TokenMinAge + time.Minute)
	srv.ExpireProviderTokens()
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() { errs <- c.Send(context.Background(), device, apns.Notification{Title: "t"}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, many := srv.ProviderTokens(), srv.TooManyUpdates(); got != 2 || many != 0 {
		t.Errorf("%d provider tokens, %d TooManyProviderTokenUpdates; want 2 (the first and one replacement) and 0", got, many)
	}
	if got := len(srv.Received()); got != n+1 {
		t.Errorf("%d notifications taken, want %d", got, n+1)
	}
}

// When APNs' clock is over an hour ahead, a fresh token is expired too:
// no new token is minted for it, the send waits (it is not dropped).
func TestExpiredProviderTokenTwice(t *testing.T) {
	srv, c, clk := setup(t)
	ahead := clk.now().Add(2 * time.Hour)
	srv.SetClock(func() time.Time { return ahead })
	err := c.Send(context.Background(), device, apns.Notification{Title: "t"})
	var ae *apns.Error
	if !errors.Is(err, webpush.ErrUnavailable) || !errors.As(err, &ae) || ae.Reason != "ExpiredProviderToken" || webpush.RetryAfter(err) != apns.TokenMinAge {
		t.Fatalf("err = %v, want ErrUnavailable ExpiredProviderToken after 20m", err)
	}
	if reqs := srv.Requests(); reqs != 1 {
		t.Errorf("%d requests, want 1 (a young token is not replaced)", reqs)
	}
}

// A title and body too long for APNs' 4096 bytes are shortened on a
// character boundary with an ellipsis and taken; only a URL too long for
// any payload is refused, before anything is sent.
func TestLongNotificationShortenedToFit(t *testing.T) {
	srv, c, _ := setup(t)
	title, body := strings.Repeat("日", 2000), strings.Repeat("\"", 3000)
	if err := c.Send(context.Background(), device, apns.Notification{Title: title, Body: body, URL: "https://x.example/a"}); err != nil {
		t.Fatalf("a long notification: %v", err)
	}
	got := srv.Received()[0]
	if !utf8.ValidString(got.Title) || !strings.HasSuffix(got.Title, "…") || !strings.HasSuffix(got.Body, "…") || got.URL != "https://x.example/a" {
		t.Errorf("want the title and body cut on a character with an ellipsis, the url whole; got url %q", got.URL)
	}
	long := apns.Notification{Title: "t", URL: "https://x.example/" + strings.Repeat("a", 4100)}
	if err := c.Send(context.Background(), device, long); !errors.Is(err, webpush.ErrTooLarge) || !webpush.Permanent(err) {
		t.Fatalf("a URL too long: %v, want ErrTooLarge", err)
	}
	if err := apns.Fits(long); !errors.Is(err, webpush.ErrTooLarge) {
		t.Errorf("Fits: %v, want ErrTooLarge", err)
	}
	if srv.Requests() != 1 {
		t.Errorf("%d requests, want 1: a payload that cannot fit is not sent", srv.Requests())
	}
}

// 410 Unregistered is ErrGone, with APNs' timestamp.
func TestUnregistered(t *testing.T) {
	srv, c, clk := setup(t)
	srv.Unregistered(device)
	err := c.Send(context.Background(), device, apns.Notification{Title: "t"})
	var ae *apns.Error
	if !errors.Is(err, webpush.ErrGone) || !webpush.Permanent(err) || !errors.As(err, &ae) || ae.Reason != "Unregistered" {
		t.Fatalf("err = %v, want ErrGone Unregistered", err)
	}
	if !ae.Timestamp.Equal(clk.now()) {
		t.Errorf("timestamp %s, want %s", ae.Timestamp, clk.now())
	}
	if len(srv.Received()) != 0 {
		t.Error("a notification to an unregistered token was taken")
	}
}

// Each of APNs' reasons lands in its class.
func TestErrorClasses(t *testing.T) {
	srv, c, _ := setup(t)
	for _, tc := range []struct {
		status int
		reason string
		want   error
	}{
		{400, "BadDeviceToken", webpush.ErrRefused},         // also a token of the other environment: a wrong setting must not delete every device
		{400, "DeviceTokenNotForTopic", webpush.ErrRefused}, // a wrong topic setting: no device deleted
		{410, "ExpiredToken", webpush.ErrGone},
		{400, "BadTopic", webpush.ErrRefused},
		{403, "InvalidProviderToken", webpush.ErrRefused},
		{413, "PayloadTooLarge", webpush.ErrRefused},
		{429, "TooManyRequests", webpush.ErrUnavailable},
		{429, "TooManyProviderTokenUpdates", webpush.ErrUnavailable},
		{500, "InternalServerError", webpush.ErrUnavailable},
		{503, "Shutdown", webpush.ErrUnavailable},
	} {
		srv.Answer(device, tc.status, tc.reason)
		err := c.Send(context.Background(), device, apns.Notification{Title: "t"})
		var ae *apns.Error
		if !errors.Is(err, tc.want) || !errors.As(err, &ae) || ae.Reason != tc.reason || ae.Status != tc.status ||
			webpush.Permanent(err) != (tc.want != webpush.ErrUnavailable) {
			t.Errorf("%d %s: err = %v, want %v", tc.status, tc.reason, err, tc.want)
		}
	}
}

// 503 with Retry-After is ErrUnavailable carrying the delay; the next send
// gets through.
func TestUnavailableRetryAfter(t *testing.T) {
	srv, c, _ := setup(t)
	srv.Unavailable(1, "5")
	err := c.Send(context.Background(), device, apns.Notification{Title: "t"})
	if !errors.Is(err, webpush.ErrUnavailable) || webpush.Permanent(err) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if got := webpush.RetryAfter(err); got != 5*time.Second {
		t.Errorf("RetryAfter = %s, want 5s", got)
	}
	if err := c.Send(context.Background(), device, apns.Notification{Title: "t"}); err != nil {
		t.Fatalf("send after recovery: %v", err)
	}
}

// Fifty concurrent sends travel as fifty streams of one HTTP/2
// connection: the first of a fresh client goes alone (APNs allows one
// stream until it has taken the provider token, which the fake holds the
// client to), then the server holds every request until all fifty are in
// flight at once, and counts one connection.
func TestConcurrentSendsShareOneConnection(t *testing.T) {
	srv, c, _ := setup(t)
	const n = 50
	sendAll := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				errs <- c.Send(context.Background(), device, apns.Notification{Title: "t" + strconv.Itoa(i)})
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	sendAll(5) // a fresh client's burst: one at a time until the first answer
	if bad := srv.Rejected(); len(bad) != 0 {
		t.Fatalf("a fresh client's burst: %v", bad)
	}
	srv.HoldUntil(n)
	sendAll(n)
	if got := len(srv.Received()); got != n+5 {
		t.Errorf("%d notifications taken, want %d", got, n+5)
	}
	if conns := srv.Connections(); conns != 1 {
		t.Errorf("%d connections for %d concurrent sends, want 1", conns, n)
	}
	if srv.ProviderTokens() != 1 {
		t.Errorf("%d provider tokens, want 1", srv.ProviderTokens())
	}
}

// A client's MaxStreams bounds its requests in flight, every caller's
// together: three batches of four at once, over a client of two
// streams, have two at the server (which holds them) and ten waiting for
// a stream, then all go, on one connection.
func TestMaxStreams(t *testing.T) {
	srv, c, _ := setup(t)
	c.MaxStreams = 2
	if err := c.Send(context.Background(), device, apns.Notification{Title: "first"}); err != nil {
		t.Fatal(err)
	}
	ch := apns.Channel{Sender: c}
	crowd.MaxStreams(t, srv, c.Waiting, crowd.Streams{Max: 2, Waiting: 10, Noun: "requests"}, 3, func(int) error {
		batch := make([]channels.Message, 4)
		for j := range batch {
			batch[j] = channels.Message{To: device, Body: []byte(`{"title":"t"}`)}
		}
		for _, o := range ch.Send(context.Background(), batch) {
			if o.Verdict != channels.Sent {
				return fmt.Errorf("outcome %+v, want Sent", o)
			}
		}
		return nil
	})
	if got := len(srv.Received()); got != 13 {
		t.Errorf("%d notifications taken, want 13", got)
	}
}

// A sender waiting for one of the client's streams gives up when its
// context ends, without a request, and that is worth a retry; the
// stream's holder is not disturbed.
func TestWaitForAStreamFollowsContext(t *testing.T) {
	srv, c, _ := setup(t)
	c.MaxStreams = 1
	if err := c.Send(context.Background(), device, apns.Notification{Title: "first"}); err != nil {
		t.Fatal(err)
	}
	crowd.WaitForAStream(t, crowd.Waiter{Server: srv, Waiting: c.Waiting, Requests: srv.Requests, Before: 1, Noun: "request",
		Send: func(ctx context.Context, _ int, title string) error {
			return c.Send(ctx, device, apns.Notification{Title: title})
		},
		Retry: func(err error) error {
			if out := apns.Classify(err); out.Verdict != channels.Retry || !errors.Is(out.Err, context.Canceled) {
				return fmt.Errorf("%+v", out)
			}
			return nil
		}})
}

// A slow APNs is given up on when the caller's context ends, and that is
// worth a retry.
func TestSlowFollowsContext(t *testing.T) {
	srv, c, _ := setup(t)
	srv.Slow(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.Send(ctx, device, apns.Notification{Title: "t"})
	if !errors.Is(err, context.DeadlineExceeded) || webpush.Permanent(err) {
		t.Fatalf("err = %v, want a deadline, not permanent", err)
	}
	srv.Slow(0)
}

// A key that is not the team's registered one is refused by APNs.
func TestWrongKey(t *testing.T) {
	srv, c, _ := setup(t)
	srv.ExpectRejections()
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c.Key = other
	err = c.Send(context.Background(), device, apns.Notification{Title: "t"})
	var ae *apns.Error
	if !errors.Is(err, webpush.ErrRefused) || !errors.As(err, &ae) || ae.Reason != "InvalidProviderToken" {
		t.Fatalf("err = %v, want ErrRefused InvalidProviderToken", err)
	}
	if rej := srv.Rejected(); len(rej) != 1 || !strings.Contains(rej[0].Error(), "does not verify") {
		t.Errorf("rejected %v, want the signature refused", rej)
	}
}

// LoadKey takes Apple's .p8 and refuses anything else, saying why.
func TestLoadKeyErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pkcs8 := func(k any) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(p256)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		path string
		want string
	}{
		"absent":  {filepath.Join(dir, "absent.p8"), "no such file"},
		"not PEM": {write("text.p8", []byte("hello")), "no PEM block"},
		"P-384":   {write("p384.p8", pkcs8(p384)), "curve P-384"},
		"RSA":     {write("rsa.p8", pkcs8(rsaKey)), "*rsa.PrivateKey"},
		"SEC1":    {write("sec1.p8", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})), `"EC PRIVATE KEY"`},
		"garbled": {write("garbled.p8", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("junk")})), "asn1"},
	} {
		_, err := apns.LoadKey(tc.path)
		if !errors.Is(err, apns.ErrKey) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrKey saying %q", name, err, tc.want)
		}
	}
	if k, err := apns.LoadKey(write("good.p8", pkcs8(p256))); err != nil || !k.Equal(p256) {
		t.Errorf("a good .p8: %v", err)
	}
}

func TestValidToken(t *testing.T) {
	for tok, ok := range map[string]bool{
		device:                          true,
		strings.ToUpper(device):         true,
		strings.Repeat("ab", 100):       true,
		device[:62]:                     false, // too short
		strings.Repeat("ab", 100) + "a": false,
		strings.Repeat("ab", 101):       false, // too long
		device[:63] + "g":               false,
		device + "0":                    false, // odd
		"":                              false,
	} {
		err := apns.ValidToken(tok)
		if (err == nil) != ok {
			t.Errorf("ValidToken(%q) = %v, want ok %v", tok, err, ok)
		}
		if err != nil && (!errors.Is(err, apns.ErrBadToken) || !errors.Is(err, webpush.ErrGone)) {
			t.Errorf("ValidToken error %v is not ErrBadToken/ErrGone", err)
		}
	}
	srv, c, _ := setup(t)
	if err := c.Send(context.Background(), "abc", apns.Notification{Title: "t"}); !errors.Is(err, apns.ErrBadToken) {
		t.Errorf("send to a malformed token: %v", err)
	}
	if srv.Requests() != 0 {
		t.Error("a malformed token was sent to APNs")
	}
}

// A client without its key or ids refuses before any request.
func TestIncompleteClient(t *testing.T) {
	srv, c, _ := setup(t)
	c.Topic = ""
	if err := c.Send(context.Background(), device, apns.Notification{Title: "t"}); !errors.Is(err, webpush.ErrRefused) {
		t.Errorf("err = %v, want ErrRefused", err)
	}
	if srv.Requests() != 0 {
		t.Error("an incomplete client sent a request")
	}
}

// A network error names the device by its token's start only: the path
// holds the token, and the error goes to the logs and the task queue.
func TestNetworkErrorHidesTheDeviceToken(t *testing.T) {
	_, c, _ := setup(t)
	c.BaseURL = "https://127.0.0.1:1" // nothing listens there
	err := c.Send(context.Background(), device, apns.Notification{Title: "t"})
	if err == nil || strings.Contains(err.Error(), device) || !strings.Contains(err.Error(), device[:8]+"…") {
		t.Fatalf("err = %v: want the device token's start only", err)
	}
}
