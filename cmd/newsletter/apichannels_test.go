package main

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// TestChannelRoutesMountedBesideTheAPI: the binary mounts the channels'
// inbound routes on the API's server (the API imports no channel): a
// provider's webhook answers as the e-mail channel's handler does (401
// unverified, 200 with its credentials), and the SMS gateway's callback
// route refuses an unsigned callback with 403.
func TestChannelRoutesMountedBesideTheAPI(t *testing.T) {
	const postmark = "postmark-token-0123456789"
	_, redisURL := redistest.Own(t, redistest.DBCommand)
	svc := startService(t, realEnv(redisURL, "smtp://127.0.0.1:1?tls=none", map[string]string{
		"NEWSLETTER_POSTMARK_TOKEN":  postmark,
		"NEWSLETTER_SMS_ACCOUNT_SID": "AC1", "NEWSLETTER_SMS_AUTH_TOKEN": "sms-auth-token", "NEWSLETTER_SMS_FROM": "+15005550006",
	}), "api")
	webhook := func(pass string) int {
		req, _ := http.NewRequest("POST", svc.base+"/webhooks/postmark", strings.NewReader(`{"RecordType":"Open"}`))
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth("postmark", pass)
		return statusOf(t, req)
	}
	if c := webhook("a-wrong-password"); c != http.StatusUnauthorized {
		t.Fatalf("Postmark's webhook with a wrong password: %d, want 401", c)
	}
	if c := webhook(postmark); c != http.StatusOK {
		t.Fatalf("Postmark's webhook with its password: %d, want 200", c)
	}
	req, _ := http.NewRequest("POST", svc.base+"/feedback/sms", strings.NewReader("Body=STOP&From=%2B447400123456&MessageSid=SM1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c := statusOf(t, req); c != http.StatusForbidden {
		t.Fatalf("an unsigned SMS callback: %d, want 403", c)
	}
}

// The binary takes a browser's subscription only at a push service: the
// browsers' own by default, the operator's list when given, any host
// (the address check alone) with private addresses allowed for tests
// and development. An endpoint elsewhere is refused with the reason,
// which the API answers as a 400.
func TestPushSubscriptionOnlyAtAPushService(t *testing.T) {
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sub := func(endpoint string) []byte {
		b, err := json.Marshal(map[string]any{"endpoint": endpoint, "keys": map[string]string{
			"p256dh": base64.RawURLEncoding.EncodeToString(key.PublicKey().Bytes()),
			"auth":   base64.RawURLEncoding.EncodeToString(make([]byte, 16)),
		}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cfg := func(env map[string]string) *config.Config {
		c, err := loadConfig(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return c.Config
	}
	defaults := browserPushSubscription(browserPushServices(cfg(nil)))
	if _, err := defaults(sub("https://fcm.googleapis.com/fcm/send/abc")); err != nil {
		t.Errorf("Chrome's push service refused: %v", err)
	}
	for _, e := range []string{"https://8.8.8.8:8443/x", "https://93.184.215.14/anything", "https://push.example.org/up/x"} {
		if _, err := defaults(sub(e)); !errors.Is(err, webpush.ErrBadSubscription) || !strings.Contains(err.Error(), "push service") {
			t.Errorf("%s: %v, want refused as no push service", e, err)
		}
	}
	own := browserPushSubscription(browserPushServices(cfg(map[string]string{"NEWSLETTER_PUSH_SERVICES": "push.example.org, .notify.windows.com"})))
	if _, err := own(sub("https://push.example.org/up/x")); err != nil {
		t.Errorf("the operator's own push service refused: %v", err)
	}
	if _, err := own(sub("https://fcm.googleapis.com/fcm/send/abc")); err == nil {
		t.Error("a list of the operator's own still took a service it does not name")
	}
	open := browserPushSubscription(browserPushServices(cfg(map[string]string{"NEWSLETTER_WEBHOOK_ALLOW_PRIVATE": "true"})))
	if _, err := open(sub("https://127.0.0.1:8443/push")); err != nil {
		t.Errorf("with private addresses allowed (a local stand-in): %v", err)
	}
	if _, err := loadConfig(func(k string) string {
		return map[string]string{"NEWSLETTER_PUSH_SERVICES": "https://push.example.org/"}[k]
	}); err == nil || !strings.Contains(err.Error(), "NEWSLETTER_PUSH_SERVICES") {
		t.Errorf("a URL for a host name: %v, want an error naming the variable", err)
	}
}
