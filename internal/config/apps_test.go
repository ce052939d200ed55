package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/apns/apnstest"
	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/fcm/fcmtest"
	"github.com/newsletter/newsletter/internal/phone"
)

// FCM and APNs are on with their settings, off without: the URLs default
// to the platforms'; APNs takes its four settings together; a key file
// that is not one, a partial APNs set, a URL that is not one and a CA file
// of no certificate each stop start-up with the setting's name.
func TestAppPlatforms(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil || c.FCM != nil || c.APNs != nil || c.PushCAs != nil || c.FCMURL != fcm.DefaultBaseURL || c.APNsURL != apns.DefaultBaseURL ||
		c.FCMRate != 1000 || c.APNsRate != 1000 {
		t.Fatalf("default: fcm %v apns %v %s %s, %v", c.FCM, c.APNs, c.FCMURL, c.APNsURL, err)
	}
	f, a := fcmtest.New(t), apnstest.New(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, a.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	on := map[string]string{
		"NEWSLETTER_FCM_CREDENTIALS_FILE": f.CredentialsFile, "NEWSLETTER_FCM_URL": f.URL,
		"NEWSLETTER_APNS_KEY_FILE": a.KeyFile, "NEWSLETTER_APNS_KEY_ID": apnstest.KeyID,
		"NEWSLETTER_APNS_TEAM_ID": apnstest.TeamID, "NEWSLETTER_APNS_TOPIC": apnstest.Topic,
		"NEWSLETTER_APNS_URL": a.URL, "NEWSLETTER_PUSH_CA_FILE": ca,
	}
	c, err = Load(env(on))
	if err != nil || c.FCM == nil || c.FCM.ProjectID != fcmtest.ProjectID || c.FCMURL != f.URL || c.APNs == nil ||
		c.APNs.Topic != apnstest.Topic || c.APNs.Key == nil || c.APNsURL != a.URL || c.PushCAs == nil {
		t.Fatalf("on: %+v %+v, %v", c.FCM, c.APNs, err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		set  map[string]string
		want []string
	}{
		"fcm key file":     {map[string]string{"NEWSLETTER_FCM_CREDENTIALS_FILE": garbage}, []string{"NEWSLETTER_FCM_CREDENTIALS_FILE"}},
		"fcm missing file": {map[string]string{"NEWSLETTER_FCM_CREDENTIALS_FILE": garbage + ".none"}, []string{"NEWSLETTER_FCM_CREDENTIALS_FILE"}},
		"fcm url":          {map[string]string{"NEWSLETTER_FCM_URL": "fcm.example"}, []string{"NEWSLETTER_FCM_URL"}},
		"apns partial":     {map[string]string{"NEWSLETTER_APNS_KEY_FILE": a.KeyFile, "NEWSLETTER_APNS_KEY_ID": "K"}, []string{"NEWSLETTER_APNS_TEAM_ID", "NEWSLETTER_APNS_TOPIC"}},
		"apns key file":    {map[string]string{"NEWSLETTER_APNS_KEY_FILE": garbage, "NEWSLETTER_APNS_KEY_ID": "K", "NEWSLETTER_APNS_TEAM_ID": "T", "NEWSLETTER_APNS_TOPIC": "app"}, []string{"NEWSLETTER_APNS_KEY_FILE"}},
		"apns plain http":  {map[string]string{"NEWSLETTER_APNS_URL": "http://127.0.0.1:1"}, []string{"NEWSLETTER_APNS_URL"}},
		"ca of no cert":    {map[string]string{"NEWSLETTER_PUSH_CA_FILE": garbage}, []string{"NEWSLETTER_PUSH_CA_FILE"}},
	} {
		_, err := Load(env(c.set))
		if err == nil {
			t.Errorf("%s: loaded", name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to name %s", name, err, w)
			}
		}
	}
}

// SMS is on with its account, token and sender together, off without;
// its caps have defaults; the countries numbers may be of default to the
// sending number's, and must be given for a short code or a messaging
// service; a partial set, a sender that is no number, short code or
// messaging service, or a country code that is none stops start-up
// naming the setting.
func TestSMSSettings(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil || c.SMS != nil {
		t.Fatalf("default: %+v %v", c.SMS, err)
	}
	c, err = Load(env(map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1", "NEWSLETTER_SMS_AUTH_TOKEN": "tok", "NEWSLETTER_SMS_FROM": "+15005550006"}))
	if err != nil || c.SMS == nil || c.SMS.URL != "https://api.twilio.com" || c.SMS.MaxSegments != 2 || c.SMS.PerNumberDay != 5 || c.SMS.PerDay != 10000 ||
		c.SMS.CodesPerClient != 5 || !slices.Equal(c.SMS.Countries, phone.Countries{"US"}) {
		t.Fatalf("on: %+v %v", c.SMS, err)
	}
	c, err = Load(env(map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1", "NEWSLETTER_SMS_AUTH_TOKEN": "tok", "NEWSLETTER_SMS_FROM": "+447400123456"}))
	if err != nil || !slices.Equal(c.SMS.Countries, phone.Countries{"GB"}) {
		t.Fatalf("a British sender: %+v %v", c.SMS, err)
	}
	for _, from := range []string{"MG0123456789", "12345"} {
		set := map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1", "NEWSLETTER_SMS_AUTH_TOKEN": "tok", "NEWSLETTER_SMS_FROM": from}
		if _, err := Load(env(set)); err == nil || !strings.Contains(err.Error(), "NEWSLETTER_SMS_COUNTRIES") {
			t.Errorf("sender %s without countries: %v", from, err)
		}
		set["NEWSLETTER_SMS_COUNTRIES"] = " us, ca,US "
		if c, err := Load(env(set)); err != nil || !slices.Equal(c.SMS.Countries, phone.Countries{"US", "CA"}) {
			t.Errorf("sender %s: %v", from, err)
		}
	}
	for name, c := range map[string]struct {
		set  map[string]string
		want []string
	}{
		"partial":  {map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1"}, []string{"NEWSLETTER_SMS_AUTH_TOKEN", "NEWSLETTER_SMS_FROM"}},
		"bad from": {map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1", "NEWSLETTER_SMS_AUTH_TOKEN": "tok", "NEWSLETTER_SMS_FROM": "our shop"}, []string{"NEWSLETTER_SMS_FROM"}},
		"caps":     {map[string]string{"NEWSLETTER_SMS_MAX_SEGMENTS": "0", "NEWSLETTER_SMS_PER_DAY": "lots"}, []string{"NEWSLETTER_SMS_MAX_SEGMENTS", "NEWSLETTER_SMS_PER_DAY"}},
		"client cap": {map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1", "NEWSLETTER_SMS_AUTH_TOKEN": "tok", "NEWSLETTER_SMS_FROM": "+15005550006", "NEWSLETTER_SMS_CODES_PER_CLIENT": "0"},
			[]string{"NEWSLETTER_SMS_CODES_PER_CLIENT"}},
		"countries": {map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1", "NEWSLETTER_SMS_AUTH_TOKEN": "tok", "NEWSLETTER_SMS_FROM": "+15005550006", "NEWSLETTER_SMS_COUNTRIES": "US,XX"},
			[]string{"NEWSLETTER_SMS_COUNTRIES", `"XX"`}},
	} {
		_, err := Load(env(c.set))
		if err == nil {
			t.Errorf("%s: loaded", name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to name %s", name, err, w)
			}
		}
	}
}
