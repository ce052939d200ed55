package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/topics"
)

// Each component's parser gets its setting as read (a default where
// there is one, the all-or-none sets only when all are given), and its
// error line is kept where config checks that setting, among config's
// own lines, in one order.
func TestParsersInOrder(t *testing.T) {
	var got []string
	fail := func(name string) error { return errors.New(name + ": want better") }
	parsers := Parsers{
		Engagement: func(mode string) error { got = append(got, "engagement "+mode); return fail("NEWSLETTER_ENGAGEMENT") },
		VAPID: func(pub, priv, subject string) error {
			got = append(got, "vapid "+pub+" "+priv+" "+subject)
			return fail("NEWSLETTER_VAPID_PUBLIC_KEY")
		},
		FCMCredentials: func(file string) error {
			got = append(got, "fcm "+file)
			return fail("NEWSLETTER_FCM_CREDENTIALS_FILE")
		},
		APNsKey: func(file, keyID, teamID, topic string) error {
			got = append(got, "apns "+file+" "+keyID+" "+teamID+" "+topic)
			return fail("NEWSLETTER_APNS_KEY_FILE")
		},
		Lanes: func(list string) error { got = append(got, "lanes "+list); return fail("NEWSLETTER_LANES") },
		SendGridKey: func(key string) error {
			got = append(got, "sendgrid "+key)
			return fail("NEWSLETTER_SENDGRID_PUBLIC_KEY")
		},
		SMTPServer:     func(url string) error { got = append(got, "smtp "+url); return fail("NEWSLETTER_SMTP_URL") },
		TestRecipients: func(list string) error { got = append(got, "test "+list); return fail("NEWSLETTER_TEST_RECIPIENTS") },
		Templates: func(dir string, set *topics.Set) error {
			got = append(got, "templates "+dir)
			if set == nil {
				t.Error("the templates are checked without the topics")
			}
			return fail("NEWSLETTER_TEMPLATE_DIR")
		},
	}
	_, err := Parse(env(map[string]string{
		"NEWSLETTER_ENGAGEMENT":       "Per-Person",
		"NEWSLETTER_VAPID_PUBLIC_KEY": "pub", "NEWSLETTER_VAPID_PRIVATE_KEY": "priv", "NEWSLETTER_VAPID_SUBJECT": "mailto:a@example.com",
		"NEWSLETTER_FCM_CREDENTIALS_FILE": "fcm.json",
		"NEWSLETTER_APNS_KEY_FILE":        "k.p8", "NEWSLETTER_APNS_KEY_ID": "K", "NEWSLETTER_APNS_TEAM_ID": "T", "NEWSLETTER_APNS_TOPIC": "app",
		"NEWSLETTER_SENDGRID_PUBLIC_KEY": "key",
		"NEWSLETTER_SMTP_URL":            "smtp://mail.example.com:25",
		"NEWSLETTER_TEST_RECIPIENTS":     "a@example.com",
		"NEWSLETTER_TEMPLATE_DIR":        "tpl",
		"NEWSLETTER_CONCURRENCY":         "zero",
	}), testDefaults, parsers)
	want := []string{"engagement per-person", "vapid pub priv mailto:a@example.com", "fcm fcm.json", "apns k.p8 K T app",
		"lanes email", "sendgrid key", "smtp smtp://mail.example.com:25", "test a@example.com", "templates tpl"}
	if !slices.Equal(got, want) {
		t.Errorf("parsers called with\n%q\nwant\n%q", got, want)
	}
	var names []string
	for _, l := range strings.Split(err.Error(), "\n") {
		names = append(names, strings.SplitN(l, ":", 2)[0])
	}
	wantNames := []string{"NEWSLETTER_CONCURRENCY", "NEWSLETTER_ENGAGEMENT", "NEWSLETTER_VAPID_PUBLIC_KEY", "NEWSLETTER_FCM_CREDENTIALS_FILE",
		"NEWSLETTER_APNS_KEY_FILE", "NEWSLETTER_LANES", "NEWSLETTER_SENDGRID_PUBLIC_KEY", "NEWSLETTER_SMTP_URL", "NEWSLETTER_TEST_RECIPIENTS",
		"NEWSLETTER_TEMPLATE_DIR"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("lines in the order\n%q\nwant\n%q", names, wantNames)
	}

	// Partial sets are config's own lines; no parser is asked.
	got = nil
	_, err = Parse(env(map[string]string{"NEWSLETTER_VAPID_PUBLIC_KEY": "pub", "NEWSLETTER_APNS_KEY_ID": "K"}), testDefaults, parsers)
	if slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "vapid") || strings.HasPrefix(s, "apns") }) {
		t.Errorf("a partial set reached its parser: %q", got)
	}
	if err == nil || !strings.Contains(err.Error(), "NEWSLETTER_VAPID_SUBJECT: want set") || !strings.Contains(err.Error(), "NEWSLETTER_APNS_TOPIC: want set") {
		t.Errorf("partial sets: %v", err)
	}
}
