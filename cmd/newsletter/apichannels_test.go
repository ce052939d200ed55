package main

import (
	"net/http"
	"strings"
	"testing"

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
