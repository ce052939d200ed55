package webpush_test

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/channels/webpush/webpushtest"
	"github.com/newsletter/newsletter/internal/netguard"
)

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RFC 8291 section 5 (keys in its appendix A): the worked example.
const (
	rfcPlaintext = "When I grow up, I want to be a watermelon"
	rfcASPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
	rfcUAPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
	rfcUAPublic  = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
	rfcAuth      = "BTBZMqHH6r4Tts7J_aSIgg"
	rfcSalt      = "DGv6ra1nlYgDCS1FRnbzlw"
	rfcBody      = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
)

// The encryption produces, byte for byte, the message of RFC 8291's
// example, and the test service's own decrypter reads it back.
func TestEncryptRFC8291Example(t *testing.T) {
	as, err := ecdh.P256().NewPrivateKey(b64(t, rfcASPrivate))
	if err != nil {
		t.Fatal(err)
	}
	sub := webpush.Subscription{Endpoint: "https://push.example.net/x", P256DH: b64(t, rfcUAPublic), Auth: b64(t, rfcAuth)}
	got, err := webpush.EncryptWith(sub, []byte(rfcPlaintext), as, b64(t, rfcSalt))
	if err != nil {
		t.Fatal(err)
	}
	if want := b64(t, rfcBody); !bytes.Equal(got, want) {
		t.Fatalf("body\n got %s\nwant %s", base64.RawURLEncoding.EncodeToString(got), rfcBody)
	}
	ua, err := ecdh.P256().NewPrivateKey(b64(t, rfcUAPrivate))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := webpushtest.Decrypt(ua, b64(t, rfcAuth), got)
	if err != nil || string(plain) != rfcPlaintext {
		t.Fatalf("decrypted %q, %v", plain, err)
	}
}

// setup is a push service and a client signed with a fresh VAPID key,
// allowed to reach loopback (the test service).
func setup(t *testing.T) (*webpushtest.Server, *webpush.Client, *webpush.VAPID) {
	t.Helper()
	pub, priv, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	v, err := webpush.NewVAPID(pub, priv, "mailto:ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	srv := webpushtest.New(t, pub)
	g := netguard.Guard{AllowPrivate: true}
	return srv, webpush.NewClient(v, g.Client(netguard.Limits{Timeout: 10 * time.Second})), v
}

// A message sent is taken by the push service, whose VAPID check passed
// and whose decryption with the browser's keys gives the plaintext sent.
func TestSendRoundTrip(t *testing.T) {
	srv, c, _ := setup(t)
	sub := srv.NewSubscription()
	ctx := context.Background()
	payload, err := webpush.IssueNotification("Issue 12: lanes", "https://news.example.com/issues/12").Payload()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, sub, payload, webpush.Options{TTL: time.Hour, Urgency: webpush.UrgencyLow, Topic: "issue12"}); err != nil {
		t.Fatal(err)
	}
	// Each message has a key and salt of its own: a second one differs on
	// the wire and still decrypts.
	if err := c.Send(ctx, sub, []byte(`{"title":"second"}`), webpush.Options{}); err != nil {
		t.Fatal(err)
	}
	got := srv.Received()
	if len(got) != 2 {
		t.Fatalf("the service took %d messages, want 2 (rejected: %v)", len(got), srv.Rejected())
	}
	if !bytes.Equal(got[0].Plaintext, payload) {
		t.Fatalf("decrypted %q, sent %q", got[0].Plaintext, payload)
	}
	n, err := got[0].Notification()
	if err != nil || n.Title != "Issue 12: lanes" || n.URL != "https://news.example.com/issues/12" {
		t.Fatalf("notification %+v, %v", n, err)
	}
	if got[0].TTL != 3600 || got[0].Urgency != "low" || got[0].Topic != "issue12" || got[0].Subject != "mailto:ops@example.com" {
		t.Fatalf("headers as received: %+v", got[0])
	}
	if got[1].TTL != int(webpush.DefaultTTL/time.Second) || string(got[1].Plaintext) != `{"title":"second"}` {
		t.Fatalf("second message: %+v", got[1])
	}
}

// The push service refuses a JWT signed by a key other than the one the
// subscription was made for, and the client reports a permanent refusal.
func TestVAPIDOfAnotherKeyRefused(t *testing.T) {
	srv, _, _ := setup(t)
	srv.ExpectRejections()
	pub, priv, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	other, err := webpush.NewVAPID(pub, priv, "https://news.example.com/")
	if err != nil {
		t.Fatal(err)
	}
	g := netguard.Guard{AllowPrivate: true}
	c := webpush.NewClient(other, g.Client(netguard.Limits{Timeout: 10 * time.Second}))
	err = c.Send(context.Background(), srv.NewSubscription(), []byte("x"), webpush.Options{})
	var se *webpush.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusUnauthorized || !errors.Is(err, webpush.ErrRefused) || !webpush.Permanent(err) {
		t.Fatalf("err = %v, want a permanent 401", err)
	}
	if len(srv.Rejected()) != 1 || len(srv.Received()) != 0 {
		t.Fatalf("rejected %v, received %d", srv.Rejected(), len(srv.Received()))
	}
}

// One JWT serves an audience until it nears its end; then a new one is
// signed. A different push service gets its own.
func TestVAPIDTokenReused(t *testing.T) {
	_, _, v := setup(t)
	now := time.Now()
	a1, err := v.AuthorizationFor("https://push.example.net", now)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := v.AuthorizationFor("https://push.example.net", now.Add(10*time.Hour))
	a3, _ := v.AuthorizationFor("https://push.example.net", now.Add(11*time.Hour+time.Minute))
	b, _ := v.AuthorizationFor("https://fcm.example.org", now)
	if a1 != a2 {
		t.Fatal("a JWT with two hours left was signed anew")
	}
	if a3 == a1 {
		t.Fatal("a JWT with under an hour left was reused")
	}
	if b == a1 {
		t.Fatal("two audiences share one JWT")
	}
	if !strings.HasPrefix(a1, "vapid t=") || !strings.HasSuffix(a1, ", k="+v.PublicKey()) {
		t.Fatalf("Authorization %q", a1)
	}
}

// 404 and 410 mean the subscription is gone: ErrGone, never retried.
func TestGone(t *testing.T) {
	srv, c, _ := setup(t)
	for _, code := range []int{http.StatusNotFound, http.StatusGone} {
		sub := srv.NewSubscription()
		srv.AnswerFor(sub.Endpoint, code, "")
		err := c.Send(context.Background(), sub, []byte("x"), webpush.Options{})
		if !errors.Is(err, webpush.ErrGone) || !webpush.Permanent(err) {
			t.Fatalf("%d: err = %v, want ErrGone", code, err)
		}
	}
	// An endpoint the service never handed out is a 404 too.
	sub := srv.NewSubscription()
	sub.Endpoint += "x"
	if err := c.Send(context.Background(), sub, []byte("x"), webpush.Options{}); !errors.Is(err, webpush.ErrGone) {
		t.Fatalf("unknown endpoint: err = %v, want ErrGone", err)
	}
}

// 429 and 5xx are retried no sooner than the Retry-After they carry, in
// seconds or as an HTTP date.
func TestRetryAfter(t *testing.T) {
	srv, c, _ := setup(t)
	// The client's clock stands still (an HTTP date is read against it);
	// the service checks the JWT against the real one.
	now := time.Now().UTC().Truncate(time.Second)
	c.SetClock(func() time.Time { return now })
	sub := srv.NewSubscription()
	for _, tc := range []struct {
		code       int
		retryAfter string
		want       time.Duration
	}{
		{http.StatusTooManyRequests, "120", 2 * time.Minute},
		{http.StatusServiceUnavailable, now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{http.StatusInternalServerError, "", 0},
		{http.StatusTooManyRequests, "31536000", webpush.MaxRetryAfter},
	} {
		srv.AnswerFor(sub.Endpoint, tc.code, tc.retryAfter)
		err := c.Send(context.Background(), sub, []byte("x"), webpush.Options{})
		if !errors.Is(err, webpush.ErrUnavailable) || webpush.Permanent(err) {
			t.Fatalf("%d: err = %v, want ErrUnavailable", tc.code, err)
		}
		if got := webpush.RetryAfter(err); got != tc.want {
			t.Fatalf("%d Retry-After %q: %s, want %s", tc.code, tc.retryAfter, got, tc.want)
		}
	}
	if len(srv.Received()) != 0 {
		t.Fatal("a refused message was recorded as taken")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                               0,
		"0":                              0,
		"-5":                             0,
		"7":                              7 * time.Second,
		"soon":                           0,
		"Mon, 02 Mar 2026 10:00:30 GMT":  30 * time.Second,
		"Mon, 02 Mar 2026 09:00:00 GMT":  0, // past
		"Monday, 02-Mar-26 10:01:00 GMT": time.Minute,
	} {
		if got := webpush.ParseRetryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %s, want %s", v, got, want)
		}
	}
}

// retryAfterError is an error of another sender that carries its own
// Retry-After, as push/fcm's and push/apns's do.
type retryAfterError struct{ wait time.Duration }

func (e retryAfterError) Error() string             { return "busy" }
func (e retryAfterError) RetryAfter() time.Duration { return e.wait }

// RetryAfter reads a wrapped error with a RetryAfter method as it reads a
// *StatusError, and says 0 of an error that carries none.
func TestRetryAfterOfOtherErrors(t *testing.T) {
	err := fmt.Errorf("send: %w", retryAfterError{wait: 9 * time.Second})
	if got := webpush.RetryAfter(err); got != 9*time.Second {
		t.Errorf("RetryAfter = %s, want 9s", got)
	}
	if got := webpush.RetryAfter(errors.New("plain")); got != 0 {
		t.Errorf("RetryAfter of a plain error = %s, want 0", got)
	}
}

// 400, 403 and 413 are refusals that no retry cures.
func TestRefused(t *testing.T) {
	srv, c, _ := setup(t)
	sub := srv.NewSubscription()
	for _, code := range []int{http.StatusBadRequest, http.StatusForbidden, http.StatusRequestEntityTooLarge} {
		srv.AnswerFor(sub.Endpoint, code, "30")
		err := c.Send(context.Background(), sub, []byte("x"), webpush.Options{})
		if !errors.Is(err, webpush.ErrRefused) || !webpush.Permanent(err) || webpush.RetryAfter(err) != 0 {
			t.Fatalf("%d: err = %v, want a permanent ErrRefused", code, err)
		}
	}
}

// Without NEWSLETTER_WEBHOOK_ALLOW_PRIVATE the client never connects to a
// loopback endpoint, even one that got past registration.
func TestLoopbackRefusedAtConnect(t *testing.T) {
	srv, _, v := setup(t)
	var g netguard.Guard
	c := webpush.NewClient(v, g.Client(netguard.Limits{Timeout: 10 * time.Second}))
	err := c.Send(context.Background(), srv.NewSubscription(), []byte("x"), webpush.Options{})
	if !errors.Is(err, netguard.ErrPrivate) {
		t.Fatalf("err = %v, want netguard.ErrPrivate", err)
	}
	if webpush.Permanent(err) {
		t.Fatal("a refused connection was called permanent: the subscription would be dropped for our own setting")
	}
	if n := srv.Attempts(); n != 0 {
		t.Fatalf("the loopback service saw %d requests", n)
	}
}

// A push service that takes the connection and never answers costs a
// sender its timeout, then a retryable error; nothing was delivered.
func TestHungServiceTimesOut(t *testing.T) {
	srv, _, v := setup(t)
	srv.Hang()
	g := netguard.Guard{AllowPrivate: true}
	c := webpush.NewClient(v, g.Client(netguard.Limits{Timeout: 200 * time.Millisecond}))
	err := c.Send(context.Background(), srv.NewSubscription(), []byte("x"), webpush.Options{})
	if err == nil || webpush.Permanent(err) {
		t.Fatalf("err = %v, want a retryable timeout", err)
	}
	if len(srv.Received()) != 0 || srv.Attempts() != 1 {
		t.Fatalf("received %d, attempts %d", len(srv.Received()), srv.Attempts())
	}
	srv.Recover()
	c2 := webpush.NewClient(v, g.Client(netguard.Limits{Timeout: 10 * time.Second}))
	if err := c2.Send(context.Background(), srv.NewSubscription(), []byte("y"), webpush.Options{}); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if len(srv.Received()) != 1 {
		t.Fatalf("received %d after recovery, want 1", len(srv.Received()))
	}
}

func TestPayloadTooLarge(t *testing.T) {
	srv, c, _ := setup(t)
	err := c.Send(context.Background(), srv.NewSubscription(), make([]byte, webpush.MaxPayload+1), webpush.Options{})
	if !errors.Is(err, webpush.ErrTooLarge) || !webpush.Permanent(err) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if err := c.Send(context.Background(), srv.NewSubscription(), bytes.Repeat([]byte("a"), webpush.MaxPayload), webpush.Options{}); err != nil {
		t.Fatalf("a payload of exactly MaxPayload: %v", err)
	}
}
