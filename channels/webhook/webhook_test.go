package webhook_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/newsletter/newsletter/channels/webhook"
	"github.com/newsletter/newsletter/internal/netguard"
)

// The official Standard Webhooks library (libraries/go of the
// specification's repository) is the second implementation: what we sign,
// it verifies; what it signs, we sign alike. It shares no code with ours.

func officialVerify(t *testing.T, secret string, body []byte, h http.Header) error {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("the official library refuses the secret %q: %v", secret, err)
	}
	return wh.Verify(body, h)
}

func headers(id string, at time.Time, sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("webhook-signature", sig)
	return h
}

func TestSignatureAgreesWithTheOfficialLibrary(t *testing.T) {
	now := time.Now()
	ev := webhook.Message{ID: "msg_HBB3JEVAZF5GQAEU63A6NRA3", Body: []byte(`{"type":"subscriber.confirmed","timestamp":"2026-03-01T12:00:00Z","data":{"id":42,"email":"zoë@example.com"}}`)}
	body := ev.Body
	for _, secret := range []string{
		webhook.NewSecret(),
		webhook.NewSecret(),
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", // the library's own test secret (24 bytes)
	} {
		for _, b := range [][]byte{body, []byte(`{"type":"x.y","data":{"a":"<&>"}}`), {}} {
			sig, err := webhook.Sign(secret, ev.ID, now, b)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(sig, "v1,") {
				t.Fatalf("signature %q: want v1,<base64>", sig)
			}
			if err := officialVerify(t, secret, b, headers(ev.ID, now, sig)); err != nil {
				t.Fatalf("the official library does not verify our signature of %q: %v", b, err)
			}
			wh, _ := standardwebhooks.NewWebhook(secret)
			theirs, err := wh.Sign(ev.ID, now, b)
			if err != nil || theirs != sig {
				t.Fatalf("the official library signs %q, we sign %q (%v)", theirs, sig, err)
			}
			// Anything changed is refused.
			for what, h := range map[string]http.Header{
				"id":        headers(ev.ID+"x", now, sig),
				"timestamp": headers(ev.ID, now.Add(-time.Second), sig),
			} {
				if err := officialVerify(t, secret, b, h); err == nil {
					t.Fatalf("a signature verified with another %s", what)
				}
			}
			if err := officialVerify(t, secret, append([]byte(" "), b...), headers(ev.ID, now, sig)); err == nil {
				t.Fatal("a signature verified another body")
			}
			if err := officialVerify(t, webhook.NewSecret(), b, headers(ev.ID, now, sig)); err == nil {
				t.Fatal("a signature verified under another secret")
			}
		}
	}
}

func TestSecrets(t *testing.T) {
	s := webhook.NewSecret()
	if !strings.HasPrefix(s, "whsec_") || s == webhook.NewSecret() {
		t.Fatalf("secret %q: want whsec_ and random base64", s)
	}
	if _, err := webhook.Sign(s, "msg_1", time.Now(), nil); err != nil {
		t.Fatalf("a new secret: %v", err)
	}
	for _, bad := range []string{"", "whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2hvcnQ=", "whsec_not*base64", "whsec_" + strings.Repeat("QUFB", 30)} {
		if _, err := webhook.Sign(bad, "msg_1", time.Now(), nil); !errors.Is(err, webhook.ErrSecret) {
			t.Errorf("secret %q: %v, want ErrSecret", bad, err)
		}
	}
}

// receiver is an endpoint that records what it gets and answers what the
// test says.
type receiver struct {
	mu     sync.Mutex
	got    []request
	answer func(n int, w http.ResponseWriter)
}

type request struct {
	method string
	header http.Header
	body   []byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, request{r.Method, r.Header.Clone(), body})
	n := len(rc.got)
	rc.mu.Unlock()
	if rc.answer != nil {
		rc.answer(n, w)
	}
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.got...)
}

var loopback = netguard.Guard{AllowPrivate: true}

func TestSendDeliversASignedEvent(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	secret := webhook.NewSecret()
	ev := webhook.Message{ID: "msg_2XQKJ7RZ5TMBV3YFNH6DWC4G", Body: []byte(`{"type":"subscriber.confirmed","timestamp":"2026-03-01T12:00:00Z","data":{"id":1,"email":"a@example.com"}}`)}
	body := ev.Body
	if err := webhook.NewSender(loopback).Send(context.Background(), srv.URL+"/hooks?key=k", secret, ev); err != nil {
		t.Fatalf("send: %v", err)
	}
	got := rc.requests()
	if len(got) != 1 || got[0].method != http.MethodPost || got[0].header.Get("Content-Type") != "application/json" {
		t.Fatalf("requests %+v", got)
	}
	if string(got[0].body) != string(body) || got[0].header.Get("webhook-id") != ev.ID {
		t.Fatalf("body %s, id %s", got[0].body, got[0].header.Get("webhook-id"))
	}
	if err := officialVerify(t, secret, got[0].body, got[0].header); err != nil {
		t.Fatalf("the receiver cannot verify what it got: %v", err)
	}
}

func TestSendAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		check  func(err error) bool
	}{
		{"200", func(w http.ResponseWriter) {}, func(err error) bool { return err == nil }},
		{"204", func(w http.ResponseWriter) { w.WriteHeader(204) }, func(err error) bool { return err == nil }},
		{"a huge 200", func(w http.ResponseWriter) { _, _ = w.Write(make([]byte, 8<<20)) }, func(err error) bool { return err == nil }},
		{"503 with Retry-After", func(w http.ResponseWriter) { w.Header().Set("Retry-After", "7"); w.WriteHeader(503) },
			func(err error) bool {
				r := webhook.AsRefused(err)
				return r != nil && r.Status == 503 && r.Wait == 7*time.Second && !r.Gone()
			}},
		{"429 with a date", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
			w.WriteHeader(429)
		}, func(err error) bool {
			r := webhook.AsRefused(err)
			// The date is an hour after the receiver's clock, in whole
			// seconds, and the wait counts from before the request: about
			// an hour either way, never the seconds form's or none.
			return r != nil && r.Status == 429 && r.Wait > 50*time.Minute && r.Wait < 70*time.Minute
		}},
		{"410", func(w http.ResponseWriter) { w.WriteHeader(410) }, func(err error) bool { r := webhook.AsRefused(err); return r != nil && r.Gone() }},
		{"404", func(w http.ResponseWriter) { w.WriteHeader(404) }, func(err error) bool { r := webhook.AsRefused(err); return r != nil && !r.Gone() }},
		{"a redirect is not followed", func(w http.ResponseWriter) { w.Header().Set("Location", "/elsewhere"); w.WriteHeader(307) },
			func(err error) bool { r := webhook.AsRefused(err); return r != nil && r.Status == 307 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &receiver{answer: func(_ int, w http.ResponseWriter) { tc.answer(w) }}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			err := webhook.NewSender(loopback).Send(context.Background(), srv.URL, webhook.NewSecret(), webhook.Message{ID: "msg_1", Body: []byte("{}")})
			if !tc.check(err) {
				t.Fatalf("answer %s: err %v", tc.name, err)
			}
			if n := len(rc.requests()); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}
		})
	}
}

// An endpoint that accepts and never answers costs the client's timeout,
// and the error does not quote the URL (it may hold the receiver's token).
func TestSendGivesUpOnASilentEndpoint(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	s := &webhook.Sender{Client: loopback.Client(netguard.Limits{Timeout: 200 * time.Millisecond})}
	err := s.Send(context.Background(), srv.URL+"/hook/SECRET-TOKEN", webhook.NewSecret(), webhook.Message{ID: "msg_1", Body: []byte("{}")})
	if err == nil || webhook.AsRefused(err) != nil {
		t.Fatalf("a silent endpoint: %v, want a failure without an answer", err)
	}
	if strings.Contains(err.Error(), "SECRET-TOKEN") {
		t.Fatalf("the error quotes the URL: %v", err)
	}
}

// The client refuses a private address at connect time, whatever the URL
// looked like when it was registered.
func TestSendRefusesPrivateAddresses(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	err := webhook.NewSender(netguard.Guard{}).Send(context.Background(), srv.URL, webhook.NewSecret(), webhook.Message{ID: "msg_1", Body: []byte("{}")})
	if !errors.Is(err, netguard.ErrPrivate) {
		t.Fatalf("sending to %s: %v, want ErrPrivate", srv.URL, err)
	}
	if len(rc.requests()) != 0 {
		t.Fatal("the private endpoint got the event")
	}
}
