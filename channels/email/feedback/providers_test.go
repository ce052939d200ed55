package feedback

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/nettest"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

var testTags = NewTagger([]byte("0123456789abcdef"))

// snsFixture is an SNS endpoint of the test's own: a signing key, its
// certificate served over HTTPS, and a client that reaches that server for
// any sns.<region>.amazonaws.com URL (the host check still runs on the URL).
type snsFixture struct {
	key    *rsa.PrivateKey
	client *http.Client
	topic  string

	mu   sync.Mutex
	hits map[string]int // requests by path
}

func (f *snsFixture) hitsOf(path string) int { f.mu.Lock(); defer f.mu.Unlock(); return f.hits[path] }

func newSNSFixture(t *testing.T) *snsFixture {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	f := &snsFixture{key: key, topic: "arn:aws:sns:us-east-1:123456789012:ses-feedback", hits: map[string]int{}}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hits[r.URL.Path]++
		f.mu.Unlock()
		switch r.URL.Path {
		case "/SimpleNotificationService-test.pem":
			_, _ = w.Write(certPEM)
		case "/SimpleNotificationService-moved.pem":
			// To the good certificate: still refused, never followed.
			http.Redirect(w, r, "/SimpleNotificationService-test.pem", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	tr := &http.Transport{
		// The test server stands in for every SNS host.
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test's own server
	}
	f.client = &http.Client{Transport: tr}
	return f
}

func (f *snsFixture) sign(t *testing.T, m *snsMessage) []byte {
	t.Helper()
	h := sha1.Sum([]byte(m.stringToSign()))
	sig, err := rsa.SignPKCS1v15(rand.Reader, f.key, crypto.SHA1, h[:])
	if err != nil {
		t.Fatal(err)
	}
	m.Signature = base64.StdEncoding.EncodeToString(sig)
	b, _ := json.Marshal(m)
	return b
}

func (f *snsFixture) notification(message string, at time.Time) *snsMessage {
	return &snsMessage{
		Type: "Notification", MessageId: "9f6c2f1e-1", TopicArn: f.topic, Message: message,
		Timestamp: at.UTC().Format(time.RFC3339), SignatureVersion: "1",
		SigningCertURL: "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem",
	}
}

func post(body []byte) *http.Request {
	return httptest.NewRequest(http.MethodPost, "/webhooks/x", strings.NewReader(string(body)))
}

func TestSESWebhook(t *testing.T) {
	f := newSNSFixture(t)
	ses := &SES{TopicARNs: []string{f.topic}, Client: f.client, Tags: testTags}
	tag := testTags.Tag(42, "digest")
	bounce := fmt.Sprintf(`{"notificationType":"Bounce","bounce":{"bounceType":"Permanent","bounceSubType":"General",
		"bouncedRecipients":[{"emailAddress":"Gone@Example.org","diagnosticCode":"smtp; 550 5.1.1 user unknown"}],"feedbackId":"fb-1"},
		"mail":{"commonHeaders":{"messageId":"<abc.%s@example.com>"}}}`, tag)
	body := f.sign(t, f.notification(bounce, time.Now()))
	evs, err := ses.Events(post(body), body)
	if err != nil || len(evs) != 1 {
		t.Fatalf("signed bounce: %+v %v", evs, err)
	}
	if e := evs[0]; e.Type != "hard" || e.Email != "gone@example.org" || e.SubscriberID != 42 || e.Kind != "digest" || e.Source != "ses" || e.ID == "" {
		t.Fatalf("bounce event %+v", e)
	}
	complaint := `{"eventType":"Complaint","complaint":{"complainedRecipients":[{"emailAddress":"r@example.org"}],"feedbackId":"fb-2","complaintFeedbackType":"abuse"},"mail":{}}`
	body = f.sign(t, f.notification(complaint, time.Now()))
	if evs, err := ses.Events(post(body), body); err != nil || len(evs) != 1 || evs[0].Type != "complaint" {
		t.Fatalf("complaint: %+v %v", evs, err)
	}
	// A subscription confirmation verifies, is logged, and applies nothing.
	sub := &snsMessage{Type: "SubscriptionConfirmation", MessageId: "m", Token: "tok", TopicArn: f.topic, Message: "confirm",
		SubscribeURL: "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription", Timestamp: time.Now().UTC().Format(time.RFC3339),
		SignatureVersion: "1", SigningCertURL: "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem"}
	body = f.sign(t, sub)
	if evs, err := ses.Events(post(body), body); err != nil || len(evs) != 0 {
		t.Fatalf("subscription confirmation: %+v %v", evs, err)
	}

	refused := map[string][]byte{}
	m := f.notification(bounce, time.Now())
	good := f.sign(t, m)
	refused["bad signature"] = []byte(strings.Replace(string(good), "Permanent", "Transient", 1))
	stale := f.notification(bounce, time.Now().Add(-2*time.Hour))
	refused["stale timestamp"] = f.sign(t, stale)
	wrongHost := f.notification(bounce, time.Now())
	wrongHost.SigningCertURL = "https://sns.us-east-1.amazonaws.com.evil.example/SimpleNotificationService-test.pem"
	refused["certificate host"] = f.sign(t, wrongHost)
	httpCert := f.notification(bounce, time.Now())
	httpCert.SigningCertURL = "http://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem"
	refused["certificate over http"] = f.sign(t, httpCert)
	otherTopic := f.notification(bounce, time.Now())
	otherTopic.TopicArn = "arn:aws:sns:us-east-1:999999999999:someone-else"
	refused["other topic"] = f.sign(t, otherTopic)
	refused["unsigned"] = []byte(`{"Type":"Notification","TopicArn":"` + f.topic + `","Message":"{}"}`)
	for name, body := range refused {
		if evs, err := ses.Events(post(body), body); !errors.Is(err, ErrUnauthorized) || len(evs) != 0 {
			t.Errorf("%s: %+v %v, want ErrUnauthorized", name, evs, err)
		}
	}
}

func TestSendGridWebhook(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pub, err := ParseSendGridKey(base64.StdEncoding.EncodeToString(der))
	if err != nil {
		t.Fatal(err)
	}
	sg := &SendGrid{Key: pub, Tags: testTags}
	body := []byte(`[{"email":"gone@example.org","event":"bounce","type":"bounce","sg_event_id":"e1","reason":"550 5.1.1"},
		{"email":"busy@example.org","event":"bounce","type":"blocked","sg_event_id":"e2"},
		{"email":"spam@example.org","event":"spamreport","sg_event_id":"e3"},
		{"email":"ok@example.org","event":"delivered","sg_event_id":"e4"}]`)
	signed := func(ts string, body []byte) *http.Request {
		h := sha256.Sum256(append([]byte(ts), body...))
		sig, err := ecdsa.SignASN1(rand.Reader, key, h[:])
		if err != nil {
			t.Fatal(err)
		}
		r := post(body)
		r.Header.Set(SendGridTimestampHeader, ts)
		r.Header.Set(SendGridSignatureHeader, base64.StdEncoding.EncodeToString(sig))
		return r
	}
	now := fmt.Sprint(time.Now().Unix())
	evs, err := sg.Events(signed(now, body), body)
	if err != nil || len(evs) != 3 || evs[0].Type != "hard" || evs[1].Type != "soft" || evs[2].Type != "complaint" || evs[0].ID != "sendgrid-e1" {
		t.Fatalf("signed events: %+v %v", evs, err)
	}
	tampered := signed(now, body)
	forged := []byte(strings.Replace(string(body), "gone@", "ceo@", 1))
	if _, err := sg.Events(tampered, forged); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("changed body: %v", err)
	}
	old := fmt.Sprint(time.Now().Add(-time.Hour).Unix())
	if _, err := sg.Events(signed(old, body), body); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("stale timestamp: %v", err)
	}
	if _, err := sg.Events(post(body), body); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("unsigned: %v", err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	h := sha256.Sum256(append([]byte(now), body...))
	sig, _ := ecdsa.SignASN1(rand.Reader, other, h[:])
	r := post(body)
	r.Header.Set(SendGridTimestampHeader, now)
	r.Header.Set(SendGridSignatureHeader, base64.StdEncoding.EncodeToString(sig))
	if _, err := sg.Events(r, body); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("another key: %v", err)
	}
	if _, err := ParseSendGridKey("not base64!"); err == nil {
		t.Error("a bad key was accepted")
	}
}

func TestMailgunWebhook(t *testing.T) {
	key := []byte("key-3ax6xnjp29jd6fds4gc373sgvjxteol0")
	mg := &Mailgun{SigningKey: key, Tags: testTags}
	tag := testTags.Tag(7, "events")
	body := func(ts, event, severity string, key []byte) []byte {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(ts + "tok123"))
		return []byte(fmt.Sprintf(`{"signature":{"timestamp":%q,"token":"tok123","signature":%q},
			"event-data":{"event":%q,"severity":%q,"recipient":"r@example.org","id":"ev-1","reason":"bounce",
			"message":{"headers":{"message-id":"x.%s@example.com"}}}}`, ts, hex.EncodeToString(mac.Sum(nil)), event, severity, tag))
	}
	now := fmt.Sprint(time.Now().Unix())
	for _, tc := range []struct{ event, severity, want string }{
		{"failed", "permanent", "hard"}, {"failed", "temporary", "soft"}, {"complained", "", "complaint"},
	} {
		b := body(now, tc.event, tc.severity, key)
		evs, err := mg.Events(post(b), b)
		if err != nil || len(evs) != 1 || evs[0].Type != tc.want || evs[0].SubscriberID != 7 || evs[0].Kind != "events" {
			t.Fatalf("%s %s: %+v %v", tc.event, tc.severity, evs, err)
		}
	}
	b := body(now, "delivered", "", key)
	if evs, err := mg.Events(post(b), b); err != nil || len(evs) != 0 {
		t.Fatalf("delivered: %+v %v", evs, err)
	}
	for name, b := range map[string][]byte{
		"wrong key":       body(now, "failed", "permanent", []byte("another key")),
		"stale timestamp": body(fmt.Sprint(time.Now().Add(-time.Hour).Unix()), "failed", "permanent", key),
		"unsigned":        []byte(`{"event-data":{"event":"failed","severity":"permanent","recipient":"r@example.org"}}`),
	} {
		if _, err := mg.Events(post(b), b); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestPostmarkWebhook(t *testing.T) {
	pm := &Postmark{Token: "s3cret-webhook-password"}
	body := []byte(`{"RecordType":"Bounce","Type":"HardBounce","ID":4323372036854775807,"Email":"gone@example.org","Description":"unknown user"}`)
	r := post(body)
	r.SetBasicAuth("postmark", "s3cret-webhook-password")
	evs, err := pm.Events(r, body)
	if err != nil || len(evs) != 1 || evs[0].Type != "hard" || evs[0].ID != "postmark-4323372036854775807" {
		t.Fatalf("hard bounce: %+v %v", evs, err)
	}
	spam := []byte(`{"RecordType":"SpamComplaint","Type":"SpamComplaint","ID":5,"Email":"s@example.org"}`)
	r = post(spam)
	r.SetBasicAuth("postmark", "s3cret-webhook-password")
	if evs, err := pm.Events(r, spam); err != nil || len(evs) != 1 || evs[0].Type != "complaint" {
		t.Fatalf("complaint: %+v %v", evs, err)
	}
	r = post(body)
	r.SetBasicAuth("postmark", "guess")
	if _, err := pm.Events(r, body); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("wrong password: %v", err)
	}
	if _, err := pm.Events(post(body), body); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("no credentials: %v", err)
	}
}

// TestSESCertificateLookUps: a certificate that cannot be had is looked up
// once and the failure remembered for a while, however many unsigned
// requests name it; a redirect is never followed, even to the good
// certificate; a URL that is no SNS certificate path is not fetched.
func TestSESCertificateLookUps(t *testing.T) {
	f := newSNSFixture(t)
	now := time.Now()
	ses := &SES{TopicARNs: []string{f.topic}, Client: f.client, Tags: testTags, Now: func() time.Time { return now }}
	withCert := func(path string) []byte {
		m := f.notification(`{"notificationType":"Bounce","bounce":{"bounceType":"Permanent","bouncedRecipients":[{"emailAddress":"r@example.org"}],"feedbackId":"fb"}}`, time.Now())
		m.SigningCertURL = "https://sns.us-east-1.amazonaws.com" + path
		return f.sign(t, m)
	}
	for i := range 5 {
		body := withCert("/SimpleNotificationService-missing.pem")
		if _, err := ses.Events(post(body), body); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("request %d with a missing certificate: %v", i+1, err)
		}
	}
	if n := f.hitsOf("/SimpleNotificationService-missing.pem"); n != 1 {
		t.Fatalf("a missing certificate was looked up %d times, want once", n)
	}
	now = now.Add(certFailureTTL + time.Second)
	body := withCert("/SimpleNotificationService-missing.pem")
	if _, err := ses.Events(post(body), body); !errors.Is(err, ErrUnauthorized) || f.hitsOf("/SimpleNotificationService-missing.pem") != 2 {
		t.Fatalf("after the failure's time: %v, %d look-ups, want a second one", err, f.hitsOf("/SimpleNotificationService-missing.pem"))
	}

	body = withCert("/SimpleNotificationService-moved.pem")
	if _, err := ses.Events(post(body), body); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("a redirected certificate: %v, want ErrUnauthorized", err)
	}
	if f.hitsOf("/SimpleNotificationService-test.pem") != 0 {
		t.Fatal("the certificate client followed a redirect")
	}
	for _, path := range []string{"/evil.pem", "/SimpleNotificationService-test.pem?x=1", "/a/../SimpleNotificationService-test.pem"} {
		body = withCert(path)
		if _, err := ses.Events(post(body), body); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("certificate path %q: %v", path, err)
		}
	}
	if f.hitsOf("/evil.pem") != 0 || f.hitsOf("/SimpleNotificationService-test.pem") != 0 {
		t.Fatal("a URL that is no SNS certificate path was fetched")
	}
	// The good certificate: fetched once for many messages.
	for range 3 {
		body = withCert("/SimpleNotificationService-test.pem")
		if evs, err := ses.Events(post(body), body); err != nil || len(evs) != 1 {
			t.Fatalf("signed bounce: %+v %v", evs, err)
		}
	}
	if n := f.hitsOf("/SimpleNotificationService-test.pem"); n != 1 {
		t.Fatalf("the certificate was fetched %d times", n)
	}
}

// TestMailgunTokenReplay: a captured {timestamp, token, signature} with
// another body is refused while the timestamp is fresh (the signature does
// not cover the body); the same request again (a retry) and a new token
// pass; the token is remembered in Redis until its timestamp is stale; a
// Redis that is away makes the request fail for now (503), never pass.
func TestMailgunTokenReplay(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBFeedback)
	key := []byte("key-3ax6xnjp29jd6fds4gc373sgvjxteol0")
	mg := &Mailgun{SigningKey: key, Nonces: RedisNonces{Client: rdb}, Tags: testTags}
	ts := fmt.Sprint(time.Now().Add(-2 * time.Minute).Unix())
	signed := func(token, recipient string) []byte {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(ts + token))
		return []byte(fmt.Sprintf(`{"signature":{"timestamp":%q,"token":%q,"signature":%q},
			"event-data":{"event":"failed","severity":"permanent","recipient":%q,"id":"ev-%s"}}`, ts, token, hex.EncodeToString(mac.Sum(nil)), recipient, recipient))
	}
	first := signed("tok-1", "gone@example.org")
	if evs, err := mg.Events(post(first), first); err != nil || len(evs) != 1 {
		t.Fatalf("first use: %+v %v", evs, err)
	}
	if evs, err := mg.Events(post(first), first); err != nil || len(evs) != 1 {
		t.Fatalf("the same request again (a retry): %+v %v", evs, err)
	}
	replay := signed("tok-1", "victim@example.org")
	if evs, err := mg.Events(post(replay), replay); !errors.Is(err, ErrUnauthorized) || len(evs) != 0 {
		t.Fatalf("the token with another body: %+v %v, want ErrUnauthorized", evs, err)
	}
	other := signed("tok-2", "victim@example.org")
	if evs, err := mg.Events(post(other), other); err != nil || len(evs) != 1 {
		t.Fatalf("a new token: %+v %v", evs, err)
	}
	keys, err := rdb.Keys(context.Background(), prefixNonce+"*").Result()
	if err != nil || len(keys) != 2 {
		t.Fatalf("remembered tokens %v %v", keys, err)
	}
	for _, k := range keys {
		ttl, err := rdb.PTTL(context.Background(), k).Result()
		// The timestamp is two minutes old: stale in eight.
		if err != nil || ttl <= 0 || ttl > mailgunWindow-2*time.Minute+2*time.Second {
			t.Fatalf("%s expires in %v %v, want when its timestamp is stale", k, ttl, err)
		}
	}

	gone := nettest.RefusedAddr(t) // nothing listens there
	away := &Mailgun{SigningKey: key, Nonces: RedisNonces{Client: redis.NewClient(&redis.Options{Addr: gone, MaxRetries: -1})}}
	b := signed("tok-3", "r@example.org")
	if evs, err := away.Events(post(b), b); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrUnauthorized) || len(evs) != 0 {
		t.Fatalf("Redis away: %+v %v, want ErrUnavailable", evs, err)
	}
}

// An event without the provider's id is applied once all the same: the
// worker drops a report whose id it has seen, so such an event is named
// by what was signed of it. A Mailgun event by its token (one per
// delivery: the same request again is the same event, another token
// another); a SendGrid event by its signed bytes (the same event twice
// in one body, the body replayed or signed anew, is one event).
func TestEventsWithoutIDsAreNamedBySignature(t *testing.T) {
	key := []byte("key-3ax6xnjp29jd6fds4gc373sgvjxteol0")
	mg := &Mailgun{SigningKey: key, Tags: testTags}
	now := fmt.Sprint(time.Now().Unix())
	mailgun := func(token string) []byte {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(now + token))
		return []byte(fmt.Sprintf(`{"signature":{"timestamp":%q,"token":%q,"signature":%q},
			"event-data":{"event":"failed","severity":"temporary","recipient":"fred@example.net"}}`, now, token, hex.EncodeToString(mac.Sum(nil))))
	}
	id := func(evs []Event, err error) string {
		t.Helper()
		if err != nil || len(evs) != 1 || evs[0].ID == "" {
			t.Fatalf("events %+v %v, want one with an id", evs, err)
		}
		return evs[0].ID
	}
	b1 := mailgun("tok-a")
	first, again, other := id(mg.Events(post(b1), b1)), id(mg.Events(post(b1), b1)), id(mg.Events(post(mailgun("tok-b")), mailgun("tok-b")))
	if first != again || first == other {
		t.Fatalf("Mailgun ids: %q, again %q, another token %q", first, again, other)
	}

	pk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sg := &SendGrid{Key: &pk.PublicKey, Tags: testTags}
	signed := func(ts string, body []byte) *http.Request {
		h := sha256.Sum256(append([]byte(ts), body...))
		sig, err := ecdsa.SignASN1(rand.Reader, pk, h[:])
		if err != nil {
			t.Fatal(err)
		}
		r := post(body)
		r.Header.Set(SendGridTimestampHeader, ts)
		r.Header.Set(SendGridSignatureHeader, base64.StdEncoding.EncodeToString(sig))
		return r
	}
	soft := `{"email":"hank@example.net","event":"bounce","type":"blocked"}`
	body := []byte("[" + soft + "," + soft + `,{"email":"gone@example.net","event":"bounce","type":"bounce"}]`)
	evs, err := sg.Events(signed(now, body), body)
	if err != nil || len(evs) != 3 || evs[0].ID == "" || evs[0].ID != evs[1].ID || evs[2].ID == evs[0].ID {
		t.Fatalf("SendGrid events without ids: %+v %v, want the twice-sent one under one id and the other under its own", evs, err)
	}
	replayed, err := sg.Events(signed(now, body), body)
	if err != nil || len(replayed) != 3 || replayed[0].ID != evs[0].ID {
		t.Fatalf("the body replayed: %+v %v, want the same ids", replayed, err)
	}
	later := fmt.Sprint(time.Now().Unix() + 1)
	if next, err := sg.Events(signed(later, body), body); err != nil || len(next) != 3 || next[0].ID != evs[0].ID {
		t.Fatalf("signed anew (SendGrid's retry): %+v %v, want the same ids", next, err)
	}
}
