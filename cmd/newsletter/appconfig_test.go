package main

// The settings whose types belong to components, read through
// loadConfig: config.Parse with the components' parsers and defaults.

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/apns/apnstest"
	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/fcm/fcmtest"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/phone"
	"github.com/newsletter/newsletter/services/engage"
	"github.com/newsletter/newsletter/worker"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigOneLinePerBadVariable(t *testing.T) {
	_, err := loadConfig(envMap(map[string]string{
		"NEWSLETTER_REDIS_URL":     "redis://127.0.0.1:6379/0", // needs a secret
		"NEWSLETTER_CONCURRENCY":   "zero",
		"NEWSLETTER_WELCOME_DELAY": "soon",
		"NEWSLETTER_SMTP_URL":      "http://x",
		"NEWSLETTER_DIGEST_CRON":   "every monday",
		"NEWSLETTER_QUIET_HOURS":   "22-8",
	}))
	if err == nil {
		t.Fatal("bad config accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	for _, name := range []string{"NEWSLETTER_SECRET", "NEWSLETTER_CONCURRENCY", "NEWSLETTER_WELCOME_DELAY", "NEWSLETTER_SMTP_URL", "NEWSLETTER_DIGEST_CRON", "NEWSLETTER_QUIET_HOURS"} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, name+":")
		}
		if !found {
			t.Errorf("no line for %s in:\n%s", name, err)
		}
	}
	if len(lines) != 6 {
		t.Errorf("want 6 lines, got %d:\n%s", len(lines), err)
	}
}

func TestConfigParsedOnce(t *testing.T) {
	env := map[string]string{
		"NEWSLETTER_REDIS_URL":   "redis://127.0.0.1:6379/3",
		"NEWSLETTER_SECRET":      "0123456789abcdef",
		"NEWSLETTER_SMTP_URL":    "smtp://mail.example.com:2525?tls=none",
		"NEWSLETTER_QUIET_HOURS": "22:00-08:00",
	}
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.Redis == nil || c.SMTP == nil || c.SMTP.Port != 2525 || c.Quiet == nil || c.Quiet.Start != 22*time.Hour || c.DigestSchedule == nil {
		t.Fatalf("values not parsed into their types: %+v", c)
	}
	if c.ConfirmCooldown != 10*time.Minute || c.ConfirmRate != 600 {
		t.Fatalf("confirmation limits: cooldown %s, rate %d", c.ConfirmCooldown, c.ConfirmRate)
	}
	if c.DigestBatch != worker.DefaultDigestBatch || c.ClaimTTL != worker.DefaultClaimTTL || c.RetryBase != worker.DefaultRetryBase {
		t.Fatalf("defaults differ from the worker's own: %+v", c)
	}
}

// Web push is on with all three VAPID variables, off with none; anything
// in between, or a pair that does not belong together, stops the start
// naming the variable to fix.
func TestConfigVAPID(t *testing.T) {
	pub, priv, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	otherPub, _, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	c, err := loadConfig(envMap(nil))
	if err != nil || c.VAPID != nil || c.WebhookAllowPrivate || c.Endpoints().AllowPrivate {
		t.Fatalf("default: web push %v, private endpoints %v, %v", c.VAPID, c.WebhookAllowPrivate, err)
	}
	c, err = loadConfig(envMap(map[string]string{"NEWSLETTER_VAPID_PUBLIC_KEY": pub, "NEWSLETTER_VAPID_PRIVATE_KEY": priv,
		"NEWSLETTER_VAPID_SUBJECT": "mailto:ops@example.com", "NEWSLETTER_WEBHOOK_ALLOW_PRIVATE": "true"}))
	if err != nil || c.VAPID == nil || c.VAPID.PublicKey() != pub || !c.Endpoints().AllowPrivate {
		t.Fatalf("all three: %+v, %v", c, err)
	}
	for name, tc := range map[string]struct {
		vars map[string]string
		bad  []string
	}{
		"public only":    {map[string]string{"NEWSLETTER_VAPID_PUBLIC_KEY": pub}, []string{"NEWSLETTER_VAPID_PRIVATE_KEY", "NEWSLETTER_VAPID_SUBJECT"}},
		"no subject":     {map[string]string{"NEWSLETTER_VAPID_PUBLIC_KEY": pub, "NEWSLETTER_VAPID_PRIVATE_KEY": priv}, []string{"NEWSLETTER_VAPID_SUBJECT"}},
		"mismatched":     {map[string]string{"NEWSLETTER_VAPID_PUBLIC_KEY": otherPub, "NEWSLETTER_VAPID_PRIVATE_KEY": priv, "NEWSLETTER_VAPID_SUBJECT": "mailto:a@example.com"}, []string{"NEWSLETTER_VAPID_PUBLIC_KEY"}},
		"bad public":     {map[string]string{"NEWSLETTER_VAPID_PUBLIC_KEY": "abc", "NEWSLETTER_VAPID_PRIVATE_KEY": priv, "NEWSLETTER_VAPID_SUBJECT": "mailto:a@example.com"}, []string{"NEWSLETTER_VAPID_PUBLIC_KEY"}},
		"bad private":    {map[string]string{"NEWSLETTER_VAPID_PUBLIC_KEY": pub, "NEWSLETTER_VAPID_PRIVATE_KEY": "abc", "NEWSLETTER_VAPID_SUBJECT": "mailto:a@example.com"}, []string{"NEWSLETTER_VAPID_PRIVATE_KEY"}},
		"bare address":   {map[string]string{"NEWSLETTER_VAPID_PUBLIC_KEY": pub, "NEWSLETTER_VAPID_PRIVATE_KEY": priv, "NEWSLETTER_VAPID_SUBJECT": "ops@example.com"}, []string{"NEWSLETTER_VAPID_SUBJECT"}},
		"allow not bool": {map[string]string{"NEWSLETTER_WEBHOOK_ALLOW_PRIVATE": "sometimes"}, []string{"NEWSLETTER_WEBHOOK_ALLOW_PRIVATE"}},
	} {
		_, err := loadConfig(envMap(tc.vars))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != len(tc.bad) {
			t.Errorf("%s: %d lines, want %d:\n%s", name, len(lines), len(tc.bad), err)
			continue
		}
		for i, v := range tc.bad {
			if !strings.HasPrefix(lines[i], v+":") {
				t.Errorf("%s: line %q, want it to name %s", name, lines[i], v)
			}
		}
	}
}

// TestConfigLanes: every lane by default with its own pool and rate; a list of
// lanes is checked, each bad lane variable its own line.
func TestConfigLanes(t *testing.T) {
	c, err := loadConfig(envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Lanes, []string{"email", "push", "webhook", "sms"}) {
		t.Fatalf("default lanes %v", c.Lanes)
	}
	for lane, want := range map[string][2]int{"email": {10, 50}, "push": {32, 1000}, "webhook": {16, 100}, "sms": {8, 10}} {
		if got := [2]int{c.laneConcurrency(lane), c.laneRate(lane)}; got != want {
			t.Errorf("lane %s: concurrency and rate %v, want %v", lane, got, want)
		}
	}
	c, err = loadConfig(envMap(map[string]string{"NEWSLETTER_LANES": "push, webhook", "NEWSLETTER_PUSH_CONCURRENCY": "4", "NEWSLETTER_WEBHOOK_RATE": "7"}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Lanes, []string{"push", "webhook"}) || c.laneConcurrency("push") != 4 || c.laneRate("webhook") != 7 {
		t.Fatalf("lanes %v, push concurrency %d, webhook rate %d", c.Lanes, c.PushConcurrency, c.WebhookRate)
	}
	if err := c.setLanes("fax"); err == nil || !strings.HasPrefix(err.Error(), `--lanes: unknown lane "fax"`) || !slices.Equal(c.Lanes, []string{"push", "webhook"}) {
		t.Fatalf("--lanes fax: %v, lanes %v; want an error naming the flag and the lanes unchanged", err, c.Lanes)
	}
	if err := c.setLanes("email"); err != nil || !slices.Equal(c.Lanes, []string{"email"}) {
		t.Fatalf("--lanes email: %v, lanes %v", err, c.Lanes)
	}

	_, err = loadConfig(envMap(map[string]string{
		"NEWSLETTER_LANES":               "email,fax",
		"NEWSLETTER_PUSH_CONCURRENCY":    "0",
		"NEWSLETTER_WEBHOOK_CONCURRENCY": "many",
		"NEWSLETTER_PUSH_RATE":           "-1",
		"NEWSLETTER_WEBHOOK_RATE":        "0",
	}))
	if err == nil {
		t.Fatal("bad lane settings accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	for _, name := range []string{"NEWSLETTER_LANES", "NEWSLETTER_PUSH_CONCURRENCY", "NEWSLETTER_WEBHOOK_CONCURRENCY", "NEWSLETTER_PUSH_RATE", "NEWSLETTER_WEBHOOK_RATE"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, name+":") }) {
			t.Errorf("no line for %s in:\n%s", name, err)
		}
	}
	if len(lines) != 5 || !strings.Contains(err.Error(), `NEWSLETTER_LANES: unknown lane "fax": want a comma-separated list of email, push, webhook, sms`) {
		t.Errorf("want 5 lines, one naming the unknown lane:\n%s", err)
	}
}

// FCM and APNs are on with their settings, off without: the URLs default
// to the platforms'; APNs takes its four settings together; a key file
// that is not one, a partial APNs set, a URL that is not one and a CA file
// of no certificate each stop start-up with the setting's name.
func TestConfigAppPlatforms(t *testing.T) {
	c, err := loadConfig(envMap(nil))
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
	c, err = loadConfig(envMap(on))
	if err != nil || c.FCM == nil || c.FCM.ProjectID != fcmtest.ProjectID || c.FCMURL != f.URL || c.APNs == nil ||
		c.APNs.Topic != apnstest.Topic || c.APNs.Key == nil || c.APNsURL != a.URL || c.PushCAs == nil {
		t.Fatalf("on: %+v %+v, %v", c.FCM, c.APNs, err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	expectRefusals(t, map[string]refusal{
		"fcm key file":     {map[string]string{"NEWSLETTER_FCM_CREDENTIALS_FILE": garbage}, []string{"NEWSLETTER_FCM_CREDENTIALS_FILE"}},
		"fcm missing file": {map[string]string{"NEWSLETTER_FCM_CREDENTIALS_FILE": garbage + ".none"}, []string{"NEWSLETTER_FCM_CREDENTIALS_FILE"}},
		"fcm url":          {map[string]string{"NEWSLETTER_FCM_URL": "fcm.example"}, []string{"NEWSLETTER_FCM_URL"}},
		"apns partial":     {map[string]string{"NEWSLETTER_APNS_KEY_FILE": a.KeyFile, "NEWSLETTER_APNS_KEY_ID": "K"}, []string{"NEWSLETTER_APNS_TEAM_ID", "NEWSLETTER_APNS_TOPIC"}},
		"apns key file":    {map[string]string{"NEWSLETTER_APNS_KEY_FILE": garbage, "NEWSLETTER_APNS_KEY_ID": "K", "NEWSLETTER_APNS_TEAM_ID": "T", "NEWSLETTER_APNS_TOPIC": "app"}, []string{"NEWSLETTER_APNS_KEY_FILE"}},
		"apns plain http":  {map[string]string{"NEWSLETTER_APNS_URL": "http://127.0.0.1:1"}, []string{"NEWSLETTER_APNS_URL"}},
		"ca of no cert":    {map[string]string{"NEWSLETTER_PUSH_CA_FILE": garbage}, []string{"NEWSLETTER_PUSH_CA_FILE"}},
	})
}

// SMS is on with its account, token and sender together, off without;
// its caps have defaults; the countries numbers may be of default to the
// sending number's, and must be given for a short code or a messaging
// service; a partial set, a sender that is no number, short code or
// messaging service, or a country code that is none stops start-up
// naming the setting.
func TestConfigSMSSettings(t *testing.T) {
	c, err := loadConfig(envMap(nil))
	if err != nil || c.SMS != nil {
		t.Fatalf("default: %+v %v", c.SMS, err)
	}
	c, err = loadConfig(envMap(map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1", "NEWSLETTER_SMS_AUTH_TOKEN": "tok", "NEWSLETTER_SMS_FROM": "+15005550006"}))
	if err != nil || c.SMS == nil || c.SMS.URL != "https://api.twilio.com" || c.SMS.MaxSegments != 2 || c.SMS.PerNumberDay != 5 || c.SMS.PerDay != 10000 ||
		c.SMS.CodesPerClient != 5 || !slices.Equal(c.SMS.Countries, phone.Countries{"US"}) {
		t.Fatalf("on: %+v %v", c.SMS, err)
	}
	c, err = loadConfig(envMap(map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1", "NEWSLETTER_SMS_AUTH_TOKEN": "tok", "NEWSLETTER_SMS_FROM": "+447400123456"}))
	if err != nil || !slices.Equal(c.SMS.Countries, phone.Countries{"GB"}) {
		t.Fatalf("a British sender: %+v %v", c.SMS, err)
	}
	for _, from := range []string{"MG0123456789", "12345"} {
		set := map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1", "NEWSLETTER_SMS_AUTH_TOKEN": "tok", "NEWSLETTER_SMS_FROM": from}
		if _, err := loadConfig(envMap(set)); err == nil || !strings.Contains(err.Error(), "NEWSLETTER_SMS_COUNTRIES") {
			t.Errorf("sender %s without countries: %v", from, err)
		}
		set["NEWSLETTER_SMS_COUNTRIES"] = " us, ca,US "
		if c, err := loadConfig(envMap(set)); err != nil || !slices.Equal(c.SMS.Countries, phone.Countries{"US", "CA"}) {
			t.Errorf("sender %s: %v", from, err)
		}
	}
	expectRefusals(t, map[string]refusal{
		"partial":  {map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1"}, []string{"NEWSLETTER_SMS_AUTH_TOKEN", "NEWSLETTER_SMS_FROM"}},
		"bad from": {map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1", "NEWSLETTER_SMS_AUTH_TOKEN": "tok", "NEWSLETTER_SMS_FROM": "our shop"}, []string{"NEWSLETTER_SMS_FROM"}},
		"caps":     {map[string]string{"NEWSLETTER_SMS_MAX_SEGMENTS": "0", "NEWSLETTER_SMS_PER_DAY": "lots"}, []string{"NEWSLETTER_SMS_MAX_SEGMENTS", "NEWSLETTER_SMS_PER_DAY"}},
		"client cap": {map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1", "NEWSLETTER_SMS_AUTH_TOKEN": "tok", "NEWSLETTER_SMS_FROM": "+15005550006", "NEWSLETTER_SMS_CODES_PER_CLIENT": "0"},
			[]string{"NEWSLETTER_SMS_CODES_PER_CLIENT"}},
		"countries": {map[string]string{"NEWSLETTER_SMS_ACCOUNT_SID": "AC1", "NEWSLETTER_SMS_AUTH_TOKEN": "tok", "NEWSLETTER_SMS_FROM": "+15005550006", "NEWSLETTER_SMS_COUNTRIES": "US,XX"},
			[]string{"NEWSLETTER_SMS_COUNTRIES", `"XX"`}},
	})
}

// The engagement settings: aggregate and no opens by default, the three
// modes, days, on/off opens, scanner networks as CIDRs or addresses, and
// one clear line for each bad value.
func TestConfigEngagementSettings(t *testing.T) {
	c, err := loadConfig(envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Engagement != engage.Aggregate || c.EngagementDays != 90 || c.Opens || c.ScannerNets != nil {
		t.Fatalf("defaults: %q %d %v %v", c.Engagement, c.EngagementDays, c.Opens, c.ScannerNets)
	}
	c, err = loadConfig(envMap(map[string]string{"NEWSLETTER_ENGAGEMENT": "per-person", "NEWSLETTER_ENGAGEMENT_DAYS": "30",
		"NEWSLETTER_OPENS": "on", "NEWSLETTER_ENGAGEMENT_SCANNER_NETS": "192.0.2.0/24, 2001:db8::1"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::1/128")}
	if c.Engagement != engage.PerPerson || c.EngagementDays != 30 || !c.Opens || len(c.ScannerNets) != 2 || c.ScannerNets[0] != want[0] || c.ScannerNets[1] != want[1] {
		t.Fatalf("set: %q %d %v %v", c.Engagement, c.EngagementDays, c.Opens, c.ScannerNets)
	}
	_, err = loadConfig(envMap(map[string]string{"NEWSLETTER_ENGAGEMENT": "everything", "NEWSLETTER_ENGAGEMENT_DAYS": "0",
		"NEWSLETTER_OPENS": "maybe", "NEWSLETTER_ENGAGEMENT_SCANNER_NETS": "10.0.0.0/33"}))
	if err == nil {
		t.Fatal("bad engagement settings accepted")
	}
	for _, name := range []string{"NEWSLETTER_ENGAGEMENT:", "NEWSLETTER_ENGAGEMENT_DAYS:", "NEWSLETTER_OPENS:", "NEWSLETTER_ENGAGEMENT_SCANNER_NETS:"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("no line for %s in:\n%s", name, err)
		}
	}
}

// The environment docker-compose.yml gives the service (its ${VAR:-default}
// forms at their defaults) starts it, with monitoring on: the compose
// file's own shape is deploy's TestCompose.
func TestConfigComposeEnvironment(t *testing.T) {
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	defaultVar := regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`)
	env := map[string]string{}
	for k, v := range compose.Services["newsletter"].Environment {
		env[k] = defaultVar.ReplaceAllString(v, "$1")
	}
	cfg, err := loadConfig(envMap(env))
	if err != nil {
		t.Fatalf("the compose environment does not start the service:\n%v", err)
	}
	if cfg.AdminToken == "" || cfg.PrometheusURL != "http://prometheus:9090" || cfg.SMTP == nil {
		t.Fatalf("monitoring needs an admin token and Prometheus, mail needs Mailpit: %+v", cfg.Config)
	}
}

// refusal is a setting that must stop start-up, its error naming each of
// want.
type refusal struct {
	set  map[string]string
	want []string
}

// expectRefusals loads each case's settings and wants an error naming
// every variable its case names.
func expectRefusals(t *testing.T, cases map[string]refusal) {
	t.Helper()
	for name, c := range cases {
		_, err := loadConfig(envMap(c.set))
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
