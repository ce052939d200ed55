package config

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/redisconn"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// testDefaults stand for the components' defaults, which the command
// hands in (cmd/newsletter's appconfig_test checks those).
var testDefaults = Defaults{
	FeedsInterval: 15 * time.Minute, DigestBatch: 100, DigestMaxPending: 50, ClaimTTL: 3 * time.Minute, RetryBase: 10 * time.Second,
	SoftBounceLimit: 3, FCMURL: "https://fcm.example", APNsURL: "https://apns.example", SMSURL: "https://sms.example",
	SMSMaxSegments: 2, SMSPerNumberDay: 5, SMSPerDay: 10000, SMSCodesPerClient: 5, Engagement: "aggregate", Lanes: "email",
}

// load parses the plain settings alone: no component parses its own.
func load(getenv func(string) string) (*Config, error) {
	return Parse(getenv, testDefaults, Parsers{})
}

func TestDefaults(t *testing.T) {
	c, err := load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:8080" || !c.DoubleOptIn || c.WelcomeDelay != 5*time.Minute || c.SendRate != 50 || c.SMTPPool != 10 || !c.Embedded() {
		t.Fatalf("defaults: %+v", c)
	}
	if len(c.Warnings()) != 2 {
		t.Fatalf("embedded http defaults should warn twice: %q", c.Warnings())
	}
}

func TestPprofNeedsAnAdminToken(t *testing.T) {
	env := map[string]string{
		"NEWSLETTER_REDIS_URL": "redis://127.0.0.1:6379/3",
		"NEWSLETTER_SECRET":    "0123456789abcdef",
		"NEWSLETTER_PPROF":     "true",
	}
	_, err := load(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "NEWSLETTER_PPROF:") {
		t.Fatalf("profiles without an admin token: %v", err)
	}
	env["NEWSLETTER_ADMIN_TOKEN"] = "a-long-admin-token-0123"
	if c, err := load(func(k string) string { return env[k] }); err != nil || !c.PProf {
		t.Fatalf("with a token: %+v %v", c, err)
	}
}

func TestAdminTokenAndDevMailbox(t *testing.T) {
	base := map[string]string{"NEWSLETTER_REDIS_URL": "redis://127.0.0.1:6379/3", "NEWSLETTER_SECRET": "0123456789abcdef"}
	for _, c := range []struct {
		set  map[string]string
		want string // the variable of the error line; "" for no error
	}{
		{map[string]string{"NEWSLETTER_ADMIN_TOKEN": "admin"}, "NEWSLETTER_ADMIN_TOKEN:"},
		// Long enough, but one character (or five) over and over.
		{map[string]string{"NEWSLETTER_ADMIN_TOKEN": "aaaaaaaaaaaaaaaa"}, "NEWSLETTER_ADMIN_TOKEN:"},
		{map[string]string{"NEWSLETTER_ADMIN_TOKEN": "abcdeabcdeabcdeabcde"}, "NEWSLETTER_ADMIN_TOKEN:"},
		{map[string]string{"NEWSLETTER_ADMIN_TOKEN": "0123456789abcdef"}, ""},
		{map[string]string{"NEWSLETTER_DEV_MAILBOX": "true"}, "NEWSLETTER_DEV_MAILBOX:"},
		{map[string]string{"NEWSLETTER_DEV_MAILBOX": "true", "NEWSLETTER_ADMIN_TOKEN": "0123456789abcdef", "NEWSLETTER_SMTP_URL": "smtp://h:25?tls=none"}, "NEWSLETTER_DEV_MAILBOX:"},
		{map[string]string{"NEWSLETTER_DEV_MAILBOX": "true", "NEWSLETTER_ADMIN_TOKEN": "0123456789abcdef"}, ""},
		{map[string]string{"NEWSLETTER_TRUSTED_PROXIES": "10.0.0.0/8, not-a-cidr"}, "NEWSLETTER_TRUSTED_PROXIES:"},
		// The provider webhooks' passwords: the admin token's rule.
		{map[string]string{"NEWSLETTER_POSTMARK_TOKEN": "hunter2"}, "NEWSLETTER_POSTMARK_TOKEN:"},
		{map[string]string{"NEWSLETTER_POSTMARK_TOKEN": "aaaaaaaaaaaaaaaa"}, "NEWSLETTER_POSTMARK_TOKEN:"},
		{map[string]string{"NEWSLETTER_POSTMARK_TOKEN": "0123456789abcdef"}, ""},
		{map[string]string{"NEWSLETTER_MAILGUN_SIGNING_KEY": "key"}, "NEWSLETTER_MAILGUN_SIGNING_KEY:"},
		{map[string]string{"NEWSLETTER_MAILGUN_SIGNING_KEY": "key-0123456789abcdef0123456789abcdef"}, ""},
	} {
		env := maps.Clone(base)
		maps.Copy(env, c.set)
		_, err := load(func(k string) string { return env[k] })
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want %q", c.set, err, c.want)
		}
	}
}

func TestDKIMDomainAlignsWithFrom(t *testing.T) {
	base := map[string]string{
		"NEWSLETTER_FROM":          "News <news@news.example.org>",
		"NEWSLETTER_DKIM_KEY_FILE": "/etc/dkim/rsa.pem",
		"NEWSLETTER_DKIM_SELECTOR": "nl2026",
	}
	for domain, ok := range map[string]bool{
		"news.example.org":          true,
		"example.org":               true, // a parent: relaxed alignment
		"NEWS.Example.ORG.":         true,
		"unrelated.example.net":     false,
		"mail.news.example.org":     false, // a child of the From domain is not what the From says
		"ews.example.org":           false, // a suffix of the text, not a parent
		"org":                       false, // a public suffix
		"evil.example.org":          false,
		"news.example.org; rm -rf/": false,
	} {
		e := maps.Clone(base)
		e["NEWSLETTER_DKIM_DOMAIN"] = domain
		_, err := load(env(e))
		if ok && err != nil {
			t.Errorf("%s: %v", domain, err)
		}
		if !ok {
			if err == nil {
				t.Errorf("%s with From on news.example.org: accepted", domain)
			} else if lines := strings.Split(err.Error(), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "NEWSLETTER_DKIM_DOMAIN: ") {
				t.Errorf("%s: want one line naming NEWSLETTER_DKIM_DOMAIN, got:\n%s", domain, err)
			}
		}
	}
	// A public-suffix From domain of two labels: its own domain aligns.
	e := maps.Clone(base)
	e["NEWSLETTER_FROM"], e["NEWSLETTER_DKIM_DOMAIN"] = "news@example.co.uk", "example.co.uk"
	if _, err := load(env(e)); err != nil {
		t.Errorf("example.co.uk: %v", err)
	}
	e["NEWSLETTER_FROM"], e["NEWSLETTER_DKIM_DOMAIN"] = "news@example.co.uk", "co.uk"
	if _, err := load(env(e)); err == nil {
		t.Error("co.uk accepted for a From on example.co.uk")
	}
}

func TestDKIMSecondKey(t *testing.T) {
	base := map[string]string{
		"NEWSLETTER_FROM":          "News <news@example.org>",
		"NEWSLETTER_DKIM_KEY_FILE": "/etc/dkim/rsa.pem",
		"NEWSLETTER_DKIM_SELECTOR": "rsa2026",
		"NEWSLETTER_DKIM_DOMAIN":   "example.org",
	}
	e := maps.Clone(base)
	e["NEWSLETTER_DKIM_ED25519_KEY_FILE"], e["NEWSLETTER_DKIM_ED25519_SELECTOR"] = "/etc/dkim/ed.pem", "ed2026"
	c, err := load(env(e))
	if err != nil {
		t.Fatal(err)
	}
	if c.DKIMEd25519KeyFile != "/etc/dkim/ed.pem" || c.DKIMEd25519Selector != "ed2026" || c.DKIMSelector != "rsa2026" {
		t.Fatalf("keys: %+v", c)
	}
	for name, change := range map[string]map[string]string{
		"no selector":    {"NEWSLETTER_DKIM_ED25519_KEY_FILE": "/etc/dkim/ed.pem"},
		"no key":         {"NEWSLETTER_DKIM_ED25519_SELECTOR": "ed2026"},
		"same selector":  {"NEWSLETTER_DKIM_ED25519_KEY_FILE": "/etc/dkim/ed.pem", "NEWSLETTER_DKIM_ED25519_SELECTOR": "RSA2026"},
		"a bad selector": {"NEWSLETTER_DKIM_ED25519_KEY_FILE": "/etc/dkim/ed.pem", "NEWSLETTER_DKIM_ED25519_SELECTOR": "ed 2026"},
	} {
		e := maps.Clone(base)
		maps.Copy(e, change)
		_, err := load(env(e))
		if err == nil || !strings.HasPrefix(err.Error(), "NEWSLETTER_DKIM_ED25519_") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: want one line naming the Ed25519 variable, got %v", name, err)
		}
	}
	// The second key needs the first beside it.
	_, err = load(env(map[string]string{
		"NEWSLETTER_FROM":                  "News <news@example.org>",
		"NEWSLETTER_DKIM_ED25519_KEY_FILE": "/etc/dkim/ed.pem",
		"NEWSLETTER_DKIM_ED25519_SELECTOR": "ed2026",
	}))
	if err == nil || !strings.HasPrefix(err.Error(), "NEWSLETTER_DKIM_ED25519_KEY_FILE: ") {
		t.Errorf("an Ed25519 key alone: %v", err)
	}
}

// TestListenAddresses: embedded mode, whose dev mailbox shows every link,
// listens on loopback unless told otherwise; with a real Redis the default
// stays every interface. A metrics listener needs an address of its own.
func TestListenAddresses(t *testing.T) {
	real := map[string]string{"NEWSLETTER_REDIS_URL": "redis://127.0.0.1:6379/3", "NEWSLETTER_SECRET": "0123456789abcdef"}
	for _, c := range []struct {
		set            map[string]string
		addr, metrics  string
		warnsOfListens bool
	}{
		{nil, "127.0.0.1:8080", "", false},
		{map[string]string{"NEWSLETTER_ADDR": ":8080"}, ":8080", "", true},
		{map[string]string{"NEWSLETTER_ADDR": "[::1]:9000", "NEWSLETTER_METRICS_ADDR": "127.0.0.1:9090"}, "[::1]:9000", "127.0.0.1:9090", false},
		{real, ":8080", "", false},
	} {
		c.set = maps.Clone(c.set)
		cfg, err := load(env(c.set))
		if err != nil {
			t.Fatalf("%v: %v", c.set, err)
		}
		if cfg.Addr != c.addr || cfg.MetricsAddr != c.metrics {
			t.Errorf("%v: listens on %q, metrics on %q; want %q, %q", c.set, cfg.Addr, cfg.MetricsAddr, c.addr, c.metrics)
		}
		warned := strings.Contains(strings.Join(cfg.Warnings(), "\n"), "not a loopback address")
		if warned != c.warnsOfListens {
			t.Errorf("%v: warnings %q", c.set, cfg.Warnings())
		}
	}
	for _, bad := range []map[string]string{
		{"NEWSLETTER_ADDR": "8080"},
		{"NEWSLETTER_METRICS_ADDR": "9090"},
		{"NEWSLETTER_METRICS_ADDR": "127.0.0.1:8080"}, // the main listener's
	} {
		_, err := load(env(bad))
		for name := range bad {
			if err == nil || !strings.HasPrefix(err.Error(), name+":") || strings.Contains(err.Error(), "\n") {
				t.Errorf("%v: %v, want one line naming %s", bad, err, name)
			}
		}
	}
}

func TestEmailTransport(t *testing.T) {
	c, err := load(env(nil))
	if err != nil || c.EmailTransport != TransportSMTP {
		t.Fatalf("default transport: %v %+v", err, c)
	}
	ses := map[string]string{
		"NEWSLETTER_EMAIL_TRANSPORT": "SES",
		"NEWSLETTER_SES_REGION":      "eu-central-1",
		"NEWSLETTER_SES_ENDPOINT":    "https://vpce-0123.email.eu-central-1.vpce.amazonaws.com",
	}
	c, err = load(env(ses))
	if err != nil {
		t.Fatal(err)
	}
	if c.EmailTransport != TransportSES || c.SESRegion != "eu-central-1" || c.SESEndpoint != ses["NEWSLETTER_SES_ENDPOINT"] {
		t.Fatalf("ses: %+v", c)
	}
	for _, w := range c.Warnings() {
		if strings.Contains(w, "SES") {
			t.Errorf("an https endpoint warns: %s", w)
		}
	}
	ses["NEWSLETTER_SES_ENDPOINT"] = "http://127.0.0.1:4566"
	if c, err = load(env(ses)); err != nil || !strings.Contains(strings.Join(c.Warnings(), "\n"), "NEWSLETTER_SES_ENDPOINT is http") {
		t.Errorf("an http endpoint: %v, warnings %q", err, c.Warnings())
	}

	// Each mistake is one line naming its variable.
	for want, e := range map[string]map[string]string{
		"NEWSLETTER_EMAIL_TRANSPORT: want smtp or ses": {"NEWSLETTER_EMAIL_TRANSPORT": "sendgrid"},
		"NEWSLETTER_SES_REGION: want the AWS region":   {"NEWSLETTER_EMAIL_TRANSPORT": "ses"},
		"NEWSLETTER_SES_REGION: want an AWS region":    {"NEWSLETTER_EMAIL_TRANSPORT": "ses", "NEWSLETTER_SES_REGION": "Frankfurt"},
		"NEWSLETTER_SES_ENDPOINT: ":                    {"NEWSLETTER_EMAIL_TRANSPORT": "ses", "NEWSLETTER_SES_REGION": "us-east-1", "NEWSLETTER_SES_ENDPOINT": "email.us-east-1.amazonaws.com"},
		"NEWSLETTER_SMTP_URL: want unset":              {"NEWSLETTER_EMAIL_TRANSPORT": "ses", "NEWSLETTER_SES_REGION": "us-east-1", "NEWSLETTER_SMTP_URL": "smtp://mail.example.com"},
		"NEWSLETTER_DEV_MAILBOX: want unset":           {"NEWSLETTER_EMAIL_TRANSPORT": "ses", "NEWSLETTER_SES_REGION": "us-east-1", "NEWSLETTER_DEV_MAILBOX": "true"},
		"NEWSLETTER_SES_REGION: want unset":            {"NEWSLETTER_SES_REGION": "us-east-1"},
		"NEWSLETTER_SES_ENDPOINT: want unset":          {"NEWSLETTER_SES_ENDPOINT": "https://email.us-east-1.amazonaws.com"},
		"NEWSLETTER_DKIM_ED25519_KEY_FILE: want unset": {
			"NEWSLETTER_EMAIL_TRANSPORT": "ses", "NEWSLETTER_SES_REGION": "us-east-1",
			"NEWSLETTER_FROM": "News <news@example.org>", "NEWSLETTER_DKIM_DOMAIN": "example.org",
			"NEWSLETTER_DKIM_KEY_FILE": "/etc/dkim/rsa.pem", "NEWSLETTER_DKIM_SELECTOR": "rsa2026",
			"NEWSLETTER_DKIM_ED25519_KEY_FILE": "/etc/dkim/ed.pem", "NEWSLETTER_DKIM_ED25519_SELECTOR": "ed2026",
		},
	} {
		_, err := load(env(e))
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: want one line starting %q, got %v", e, want, err)
		}
	}
}

// TestClusterConfig: NEWSLETTER_REDIS_CLUSTER_ADDRS is read as seed nodes
// in the three forms, with TLS from rediss://, credentials from a seed or
// NEWSLETTER_REDIS_PASSWORD; it is a real Redis (not embedded, a secret
// needed), and it wins over NEWSLETTER_REDIS_URL with a warning.
func TestClusterConfig(t *testing.T) {
	base := map[string]string{"NEWSLETTER_SECRET": "0123456789abcdef"}
	with := func(kv ...string) map[string]string {
		m := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name       string
		env        map[string]string
		addrs      []string
		tls        bool
		serverName string
		user, pass string
	}{
		{name: "bare", env: with("NEWSLETTER_REDIS_CLUSTER_ADDRS", "10.0.0.1:7000, 10.0.0.2:7000,[fd00::3]:7000"),
			addrs: []string{"10.0.0.1:7000", "10.0.0.2:7000", "[fd00::3]:7000"}},
		{name: "redis URLs and a password", env: with("NEWSLETTER_REDIS_CLUSTER_ADDRS", "redis://a.example:7000,b.example:7001", "NEWSLETTER_REDIS_PASSWORD", " s3cret"),
			addrs: []string{"a.example:7000", "b.example:7001"}, pass: " s3cret"},
		{name: "TLS with credentials in a seed", env: with("NEWSLETTER_REDIS_CLUSTER_ADDRS", "rediss://app:pw@node1.example:6380/0,rediss://node2.example:6380"),
			addrs: []string{"node1.example:6380", "node2.example:6380"}, tls: true, serverName: "node1.example", user: "app", pass: "pw"},
		{name: "TLS to IPs: each node checked at its own address", env: with("NEWSLETTER_REDIS_CLUSTER_ADDRS", "rediss://10.0.0.1:6380"),
			addrs: []string{"10.0.0.1:6380"}, tls: true},
		{name: "a user in the seed, the password beside", env: with("NEWSLETTER_REDIS_CLUSTER_ADDRS", "redis://app@a.example:7000", "NEWSLETTER_REDIS_PASSWORD", "pw"),
			addrs: []string{"a.example:7000"}, user: "app", pass: "pw"},
		{name: "the same password in both", env: with("NEWSLETTER_REDIS_CLUSTER_ADDRS", "redis://:pw@a.example:7000", "NEWSLETTER_REDIS_PASSWORD", "pw"),
			addrs: []string{"a.example:7000"}, pass: "pw"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(env(c.env))
			if err != nil {
				t.Fatal(err)
			}
			cl, ok := cfg.Redis.(redisconn.Cluster)
			if !ok {
				t.Fatalf("Redis is %T, want redisconn.Cluster", cfg.Redis)
			}
			if !slices.Equal(cl.Addrs, c.addrs) || cl.Username != c.user || cl.Password != c.pass {
				t.Errorf("seeds %q user %q password %q, want %q %q %q", cl.Addrs, cl.Username, cl.Password, c.addrs, c.user, c.pass)
			}
			if got := cl.TLSConfig != nil; got != c.tls {
				t.Errorf("TLS %v, want %v", got, c.tls)
			} else if c.tls && cl.TLSConfig.ServerName != c.serverName {
				t.Errorf("TLS server name %q, want %q", cl.TLSConfig.ServerName, c.serverName)
			}
			if cfg.Embedded() || cfg.RedisVar() != "NEWSLETTER_REDIS_CLUSTER_ADDRS" || cfg.Addr != DefaultAddr {
				t.Errorf("embedded %v, named %s, listening on %s: want a real Redis", cfg.Embedded(), cfg.RedisVar(), cfg.Addr)
			}
			if strings.Contains(cl.String(), "pw") {
				t.Errorf("String shows the password: %s", cl)
			}
		})
	}

	t.Run("a secret is needed", func(t *testing.T) {
		_, err := load(env(map[string]string{"NEWSLETTER_REDIS_CLUSTER_ADDRS": "10.0.0.1:7000"}))
		if err == nil || !strings.Contains(err.Error(), "NEWSLETTER_SECRET: want a secret") {
			t.Fatalf("no secret on a cluster: %v", err)
		}
	})
	t.Run("the cluster wins over the URL", func(t *testing.T) {
		cfg, err := load(env(with("NEWSLETTER_REDIS_CLUSTER_ADDRS", "10.0.0.1:7000", "NEWSLETTER_REDIS_URL", "redis://127.0.0.1:6379/3")))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := cfg.Redis.(redisconn.Cluster); !ok {
			t.Fatalf("Redis is %T, want the cluster", cfg.Redis)
		}
		warned := slices.ContainsFunc(cfg.Warnings(), func(w string) bool {
			return strings.Contains(w, "NEWSLETTER_REDIS_CLUSTER_ADDRS and NEWSLETTER_REDIS_URL are both set: the cluster is used")
		})
		if !warned {
			t.Errorf("no warning about both: %q", cfg.Warnings())
		}
	})
	t.Run("one Redis: nothing changes", func(t *testing.T) {
		cfg, err := load(env(with("NEWSLETTER_REDIS_URL", "redis://127.0.0.1:6379/3")))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := cfg.Redis.(asynq.RedisClientOpt); !ok || cfg.RedisVar() != "NEWSLETTER_REDIS_URL" {
			t.Fatalf("Redis is %T named %s, want asynq.RedisClientOpt from NEWSLETTER_REDIS_URL", cfg.Redis, cfg.RedisVar())
		}
		for _, w := range cfg.Warnings() {
			if strings.Contains(w, "CLUSTER") {
				t.Errorf("a warning about the cluster: %s", w)
			}
		}
	})
}

// TestClusterConfigErrors: each mistake in the seeds is one line naming
// NEWSLETTER_REDIS_CLUSTER_ADDRS and what is wrong, never showing a
// password.
func TestClusterConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name, addrs, password string
		want                  string
		variable              string
	}{
		{"empty entry", "10.0.0.1:7000,,10.0.0.2:7000", "", "seed 2 is empty", ""},
		{"trailing comma", "10.0.0.1:7000,", "", "seed 2 is empty", ""},
		{"no port", "10.0.0.1", "", `"10.0.0.1": want host:port`, ""},
		{"no host", ":7000", "", "no host", ""},
		{"port not a number", "a.example:http", "", `port "http"`, ""},
		{"port too high", "a.example:70000", "", `port "70000"`, ""},
		{"URL without port", "redis://:pw@a.example", "", `"redis://***@a.example": want host:port`, ""},
		{"other scheme", "redis-sentinel://a.example:26379", "", "want host:port, redis://host:port or rediss://host:port", ""},
		{"a database", "redis://a.example:7000/3", "", "database 0 only", ""},
		{"options", "redis://a.example:7000?dial_timeout=3", "", "takes no options", ""},
		{"mixed TLS and plain", "rediss://a.example:7000,a.example:7001", "", "1 seeds are rediss:// (TLS) and 1 plain", ""},
		{"mixed TLS and redis://", "redis://a.example:7000,rediss://a.example:7001", "", "1 seeds are rediss:// (TLS) and 1 plain", ""},
		{"different credentials", "redis://u:pw@a.example:7000,redis://u:pw2@b.example:7000", "", "name different credentials", ""},
		{"password twice", "redis://:pw@a.example:7000", "other", "a password other than NEWSLETTER_REDIS_PASSWORD", ""},
		{"password without a cluster", "", "pw", "NEWSLETTER_REDIS_CLUSTER_ADDRS set too", "NEWSLETTER_REDIS_PASSWORD"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(env(map[string]string{
				"NEWSLETTER_REDIS_URL": "redis://127.0.0.1:6379/3", "NEWSLETTER_SECRET": "0123456789abcdef",
				"NEWSLETTER_REDIS_CLUSTER_ADDRS": c.addrs, "NEWSLETTER_REDIS_PASSWORD": c.password,
			}))
			if err == nil {
				t.Fatal("accepted")
			}
			variable := c.variable
			if variable == "" {
				variable = "NEWSLETTER_REDIS_CLUSTER_ADDRS"
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], variable+": ") || !strings.Contains(lines[0], c.want) {
				t.Errorf("error:\n%s\nwant one line %s: …%s…", err, variable, c.want)
			}
			if strings.Contains(err.Error(), ":pw") || strings.Contains(err.Error(), "pw2") {
				t.Errorf("the error shows a password: %s", err)
			}
		})
	}
}

// TestRedisAck: NEWSLETTER_REDIS_ACK_REPLICAS (unset: detect at start)
// and NEWSLETTER_REDIS_ACK_TIMEOUT (default 500ms), and the values they
// refuse.
func TestRedisAck(t *testing.T) {
	base := map[string]string{"NEWSLETTER_REDIS_URL": "redis://127.0.0.1:6379/3", "NEWSLETTER_SECRET": "0123456789abcdef"}
	for _, c := range []struct {
		set      map[string]string
		replicas int
		timeout  time.Duration
		bad      string // the variable of the error line; "" for none
	}{
		{nil, AckReplicasDetect, 500 * time.Millisecond, ""},
		{map[string]string{"NEWSLETTER_REDIS_ACK_REPLICAS": "0"}, 0, 500 * time.Millisecond, ""},
		{map[string]string{"NEWSLETTER_REDIS_ACK_REPLICAS": "2", "NEWSLETTER_REDIS_ACK_TIMEOUT": "250ms"}, 2, 250 * time.Millisecond, ""},
		{map[string]string{"NEWSLETTER_REDIS_ACK_TIMEOUT": "2s"}, AckReplicasDetect, 2 * time.Second, ""},
		{map[string]string{"NEWSLETTER_REDIS_ACK_REPLICAS": "-1"}, 0, 0, "NEWSLETTER_REDIS_ACK_REPLICAS:"},
		{map[string]string{"NEWSLETTER_REDIS_ACK_REPLICAS": "one"}, 0, 0, "NEWSLETTER_REDIS_ACK_REPLICAS:"},
		{map[string]string{"NEWSLETTER_REDIS_ACK_TIMEOUT": "0"}, 0, 0, "NEWSLETTER_REDIS_ACK_TIMEOUT:"},
		{map[string]string{"NEWSLETTER_REDIS_ACK_TIMEOUT": "-5ms"}, 0, 0, "NEWSLETTER_REDIS_ACK_TIMEOUT:"},
		{map[string]string{"NEWSLETTER_REDIS_ACK_TIMEOUT": "500"}, 0, 0, "NEWSLETTER_REDIS_ACK_TIMEOUT:"},
		{map[string]string{"NEWSLETTER_REDIS_ACK_TIMEOUT": "2001ms"}, 0, 0, "NEWSLETTER_REDIS_ACK_TIMEOUT:"},
	} {
		e := maps.Clone(base)
		maps.Copy(e, c.set)
		cfg, err := load(env(e))
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%v: %v, want an error on %s", c.set, err, c.bad)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", c.set, err)
			continue
		}
		if cfg.RedisAckReplicas != c.replicas || cfg.RedisAckTimeout != c.timeout {
			t.Errorf("%v: replicas %d timeout %s, want %d %s", c.set, cfg.RedisAckReplicas, cfg.RedisAckTimeout, c.replicas, c.timeout)
		}
	}
	// The embedded Redis has no replicas to wait for.
	if _, err := load(env(map[string]string{"NEWSLETTER_REDIS_ACK_REPLICAS": "1"})); err == nil || !strings.Contains(err.Error(), "NEWSLETTER_REDIS_ACK_REPLICAS:") {
		t.Errorf("embedded with 1 replica: %v, want an error", err)
	}
	if _, err := load(env(map[string]string{"NEWSLETTER_REDIS_ACK_REPLICAS": "0"})); err != nil {
		t.Errorf("embedded with 0 replicas: %v", err)
	}
}

// NEWSLETTER_CLOCK_OFFSET (a testing knob) is a duration either way, at
// most an hour; anything else names the variable.
func TestClockOffset(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "90s": 90 * time.Second, "-90s": -90 * time.Second, "1h": time.Hour} {
		c, err := load(env(map[string]string{"NEWSLETTER_CLOCK_OFFSET": v}))
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if c.ClockOffset != want {
			t.Fatalf("%q: offset %v, want %v", v, c.ClockOffset, want)
		}
	}
	for _, v := range []string{"soon", "61m", "-2h"} {
		if _, err := load(env(map[string]string{"NEWSLETTER_CLOCK_OFFSET": v})); err == nil || !strings.Contains(err.Error(), "NEWSLETTER_CLOCK_OFFSET") {
			t.Fatalf("%q: %v, want an error naming the variable", v, err)
		}
	}
}
