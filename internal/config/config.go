package config

import (
	"crypto/ecdsa"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/robfig/cron/v3"

	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/clientip"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/phone"
	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/engage"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
	"github.com/newsletter/newsletter/worker"
)

// Config is every setting of the service. Zero values are never used: Load
// fills defaults.
type Config struct {
	// Addr is where the HTTP server listens: DefaultAddr, or
	// DefaultEmbeddedAddr in embedded mode, whose dev mailbox shows every
	// confirm and unsubscribe link to whoever reaches it.
	Addr string
	// MetricsAddr, when set, is a second listener that serves /metrics
	// alone, and the main one no longer does: the figures stay on an
	// internal network while the form is public.
	MetricsAddr string
	RedisURL    string // empty (and no cluster): embedded in-memory Redis
	// RedisClusterAddrs is NEWSLETTER_REDIS_CLUSTER_ADDRS as given: the
	// seed nodes of a Redis Cluster. Set, it is the connection, whatever
	// RedisURL says.
	RedisClusterAddrs string
	// Redis is the connection parsed: a redisconn.Cluster from
	// RedisClusterAddrs, or RedisURL as asynq parses it; nil in embedded
	// mode.
	Redis        asynq.RedisConnOpt
	SMTPURL      string         // empty: dev mailbox
	SMTP         *mailer.Server // SMTPURL parsed; nil: dev mailbox
	From         string
	BaseURL      string
	Secret       string // empty only in embedded mode, where a random one is made
	AdminToken   string
	DoubleOptIn  bool
	WelcomeDelay time.Duration
	DigestCron   string
	// DigestSchedule is DigestCron parsed.
	DigestSchedule cron.Schedule
	// FeedsInterval is how often the topics file's feeds are polled
	// (NEWSLETTER_FEEDS_INTERVAL).
	FeedsInterval time.Duration
	Concurrency   int
	SubscribeRate int // per minute per client; 0 = off
	DigestBatch   int
	QuietHours    string
	Quiet         *quiet.Window // QuietHours parsed; nil when unset
	// DigestMaxPending is how many batches may wait in the critical queue
	// before the planner pauses.
	DigestMaxPending int
	SendRate         int // mails per second across all workers
	SMTPPool         int
	GroupGrace       time.Duration
	GroupMaxDelay    time.Duration
	GroupMaxSize     int
	Shutdown         time.Duration
	TemplateDir      string
	// TopicsFile is NEWSLETTER_TOPICS_FILE; Topics what it declares (or
	// the built-in topics and sequence).
	TopicsFile   string
	Topics       *topics.Set
	DKIMKeyFile  string
	DKIMSelector string
	DKIMDomain   string
	// DKIMEd25519KeyFile, when set, is a second key (Ed25519) beside an
	// RSA DKIMKeyFile: both sign every mail.
	DKIMEd25519KeyFile  string
	DKIMEd25519Selector string
	// MonitoringReadOnly and PrometheusURL configure asynqmon.
	MonitoringReadOnly bool
	PrometheusURL      string
	// PProf serves /debug/pprof/ behind the admin token on every role.
	PProf bool
	// DevMailbox keeps mail in the dev mailbox with a real Redis and no
	// SMTP server (NEWSLETTER_DEV_MAILBOX); the embedded default always
	// does.
	DevMailbox bool
	// TestGate is NEWSLETTER_TEST_RECIPIENTS parsed: the addresses any
	// test send may reach besides the account's own.
	TestGate *issues.TestGate
	// ConfirmSendAbove is NEWSLETTER_CONFIRM_SEND_ABOVE: the audience
	// above which the console asks the publisher to type it.
	ConfirmSendAbove int64
	// Clients is NEWSLETTER_TRUSTED_PROXIES parsed: the proxies whose
	// X-Forwarded-For is believed.
	Clients clientip.Resolver
	// ConfirmCooldown: at most one confirmation per pending address in
	// this window (0: no limit); ConfirmRate: confirmations per minute
	// across the service (0: no limit).
	ConfirmCooldown time.Duration
	ConfirmRate     int
	// UnsubscribeByEmail: "immediate" or "confirm" (api.Unsubscribe*).
	UnsubscribeByEmail string
	// Engagement is NEWSLETTER_ENGAGEMENT: how the links in issues are
	// counted (engage.Aggregate, the default; engage.PerPerson also keeps
	// each person's clicks EngagementDays; engage.Off leaves links alone).
	Engagement     engage.Mode
	EngagementDays int
	// Opens is NEWSLETTER_OPENS=on: issues carry the open pixel.
	Opens bool
	// ScannerNets are NEWSLETTER_ENGAGEMENT_SCANNER_NETS: the networks
	// of link scanners, whose clicks are machines'.
	ScannerNets []netip.Prefix
	// RequestTimeout bounds the Redis work of one HTTP request.
	RequestTimeout time.Duration
	// ClaimTTL bounds how long a dead worker's delivery claim blocks a
	// retry; RetryBase is the first retry delay of a failed send.
	ClaimTTL  time.Duration
	RetryBase time.Duration
	// SMTPHelo is the name in EHLO (default: the host of BaseURL): a
	// bare machine name costs spam points once mail leaves a relay.
	SMTPHelo string
	// BounceAddress is the envelope sender (with a VERP tag per mail);
	// empty: the From address. BounceSMTPAddr is where the bounce intake
	// listens (empty: off).
	BounceAddress  string
	BounceSMTPAddr string
	// SoftBounceLimit soft bounces within 30 days make a bounce.
	SoftBounceLimit int
	// The providers' webhook secrets; each empty one turns its route off.
	MailgunSigningKey string
	SendGridPublicKey string // base64 DER
	PostmarkToken     string
	SESTopicARNs      []string
	// PollInterval is how often workers move due scheduled and retry tasks
	// into their queues (asynq's default 5s). Tests shorten it.
	PollInterval time.Duration
	// EmailTransport is how mail leaves: TransportSMTP (NEWSLETTER_SMTP_URL,
	// or the dev mailbox without one) or TransportSES (the Amazon SES v2
	// API in SESRegion, at SESEndpoint when set).
	EmailTransport string
	SESRegion      string
	SESEndpoint    string
	// VAPID is the web push identity (NEWSLETTER_VAPID_PUBLIC_KEY,
	// _PRIVATE_KEY and _SUBJECT, all three or none); nil: web push off.
	VAPID *webpush.VAPID
	// FCM is Firebase Cloud Messaging for Android (and iOS through
	// Firebase) app installs: the service account's key
	// (NEWSLETTER_FCM_CREDENTIALS_FILE), at FCMURL (NEWSLETTER_FCM_URL,
	// default fcm.DefaultBaseURL; tests point it at a fake); nil: off.
	FCM    *fcm.Credentials
	FCMURL string
	// FCMRate and APNsRate are each platform's own rate inside the push
	// lane, shared by every push worker (NEWSLETTER_FCM_RATE,
	// NEWSLETTER_APNS_RATE, per second).
	FCMRate, APNsRate int
	// APNs is Apple's push service for iOS app installs: the .p8 key
	// (NEWSLETTER_APNS_KEY_FILE) with its key id, team id and the app's
	// bundle id as topic (NEWSLETTER_APNS_KEY_ID, _TEAM_ID, _TOPIC), at
	// APNsURL (NEWSLETTER_APNS_URL, default apns.DefaultBaseURL); nil:
	// off.
	APNs    *APNs
	APNsURL string
	// PushCAs are the certificates the app platforms' clients trust: the
	// system's and those of NEWSLETTER_PUSH_CA_FILE (PEM: a TLS-inspecting
	// proxy on the way to FCM and APNs, or a local stand-in in tests);
	// nil: the system's alone.
	PushCAs *x509.CertPool
	// WebhookAllowPrivate lets push and webhook endpoints be http and on
	// loopback or private addresses (NEWSLETTER_WEBHOOK_ALLOW_PRIVATE:
	// tests and development only).
	WebhookAllowPrivate bool
	// Lanes are the lanes a worker serves (NEWSLETTER_LANES, default every
	// lane; `newsletter worker --lanes` overrides it). Each lane has its
	// own pool: Concurrency is the e-mail lane's, PushConcurrency and
	// WebhookConcurrency the others'; PushRate and WebhookRate are their
	// shared rates per second (SendRate is e-mail's).
	Lanes              []string
	PushConcurrency    int
	WebhookConcurrency int
	PushRate           int
	WebhookRate        int
	// SMS is the SMS gateway (a Twilio-compatible Messages API); nil: SMS
	// off. SMSConcurrency and SMSRate are the sms lane's pool and shared
	// rate.
	SMS            *SMS
	SMSConcurrency int
	SMSRate        int
	// RequirePostalAddress refuses bulk sends (issues, digests) while the
	// settings have no postal address (NEWSLETTER_REQUIRE_POSTAL_ADDRESS:
	// on, except in embedded mode, where it defaults off and the banner
	// says so).
	RequirePostalAddress bool
}

// SMS is the SMS gateway's account and the limits that protect the bill.
type SMS struct {
	// URL is the API's base (NEWSLETTER_SMS_URL, default Twilio's).
	URL string
	// AccountSID and AuthToken are the account's (the token also checks
	// the gateway's callbacks); From is an E.164 number or a messaging
	// service's id (MG…).
	AccountSID, AuthToken, From string
	// MaxSegments caps a text (NEWSLETTER_SMS_MAX_SEGMENTS, default 2).
	MaxSegments int
	// PerNumberDay and PerDay cap the texts a day to one number and in
	// all (NEWSLETTER_SMS_PER_NUMBER_DAY, default 5;
	// NEWSLETTER_SMS_PER_DAY, default 10000): past them texts wait for
	// the next day (UTC).
	PerNumberDay, PerDay int
	// Countries are the countries whose numbers may be given for texts
	// (NEWSLETTER_SMS_COUNTRIES, ISO 3166 codes: "US,CA"); default the
	// country of From when From is a number. A short code or a messaging
	// service says no country: the list is then required.
	Countries phone.Countries
	// CodesPerClient caps the codes one client address may have texted
	// in an hour (NEWSLETTER_SMS_CODES_PER_CLIENT, default
	// sms.DefaultCodesPerClient).
	CodesPerClient int
}

// Endpoints is the check for the URLs that browsers (push) and admins
// (webhooks) hand in, at registration and at connect time.
func (c *Config) Endpoints() netguard.Guard {
	return netguard.Guard{AllowPrivate: c.WebhookAllowPrivate}
}

// LaneConcurrency is the size of lane's pool.
func (c *Config) LaneConcurrency(lane string) int {
	switch lane {
	case tasks.LanePush:
		return c.PushConcurrency
	case tasks.LaneWebhook:
		return c.WebhookConcurrency
	case tasks.LaneSMS:
		return c.SMSConcurrency
	}
	return c.Concurrency
}

// LaneRate is lane's shared rate per second.
func (c *Config) LaneRate(lane string) int {
	switch lane {
	case tasks.LanePush:
		return c.PushRate
	case tasks.LaneWebhook:
		return c.WebhookRate
	case tasks.LaneSMS:
		return c.SMSRate
	}
	return c.SendRate
}

// SetLanes replaces Lanes with the comma-separated list s (`newsletter
// worker --lanes`), checked as NEWSLETTER_LANES is.
func (c *Config) SetLanes(s string) error {
	lanes, err := tasks.ParseLanes(s)
	if err != nil {
		return fmt.Errorf("--lanes: %w", err)
	}
	c.Lanes = lanes
	return nil
}

// The default listen addresses: every interface, or in embedded mode the
// loopback interface only (NEWSLETTER_ADDR overrides both).
const (
	DefaultAddr         = ":8080"
	DefaultEmbeddedAddr = "127.0.0.1:8080"
)

// Loopback reports whether the listen address addr (host:port) is
// reachable from this machine only.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// The e-mail transports.
const (
	TransportSMTP = "smtp"
	TransportSES  = "ses"
)

// Embedded reports whether the service runs on its in-memory default, where
// nothing is durable and missing secrets are made up at start.
func (c *Config) Embedded() bool { return c.RedisURL == "" && c.RedisClusterAddrs == "" }

// RedisVar names the variable the Redis connection comes from, for
// messages about it.
func (c *Config) RedisVar() string {
	if c.RedisClusterAddrs != "" {
		return "NEWSLETTER_REDIS_CLUSTER_ADDRS"
	}
	return "NEWSLETTER_REDIS_URL"
}

// Load reads the environment through getenv (os.Getenv when nil). The error,
// if any, has one line per bad variable.
func Load(getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	p := parser{getenv: getenv}
	c := p.read()
	p.providers(c)
	p.listeners(c)
	p.identity(c)
	p.templates(c)
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return c, nil
}

// read reads every variable with its default; the checks across
// variables come after it.
func (p *parser) read() *Config {
	c := &Config{
		Addr:               p.str("NEWSLETTER_ADDR", ""),
		MetricsAddr:        p.str("NEWSLETTER_METRICS_ADDR", ""),
		RedisURL:           p.str("NEWSLETTER_REDIS_URL", ""),
		RedisClusterAddrs:  p.str("NEWSLETTER_REDIS_CLUSTER_ADDRS", ""),
		SMTPURL:            p.str("NEWSLETTER_SMTP_URL", ""),
		From:               p.str("NEWSLETTER_FROM", "Newsletter <newsletter@localhost>"),
		BaseURL:            strings.TrimRight(p.str("NEWSLETTER_BASE_URL", "http://localhost:8080"), "/"),
		Secret:             p.str("NEWSLETTER_SECRET", ""),
		AdminToken:         p.str("NEWSLETTER_ADMIN_TOKEN", ""),
		DoubleOptIn:        p.boolean("NEWSLETTER_DOUBLE_OPTIN", true),
		WelcomeDelay:       p.duration("NEWSLETTER_WELCOME_DELAY", 5*time.Minute, 0),
		DigestCron:         p.str("NEWSLETTER_DIGEST_CRON", "0 9 * * 1"),
		FeedsInterval:      p.duration("NEWSLETTER_FEEDS_INTERVAL", tasks.DefaultFeedsInterval, 10*time.Second),
		Concurrency:        p.integer("NEWSLETTER_CONCURRENCY", 10, 1),
		SubscribeRate:      p.integer("NEWSLETTER_SUBSCRIBE_RATE", 10, 0),
		DigestBatch:        p.integer("NEWSLETTER_DIGEST_BATCH", worker.DefaultDigestBatch, 1),
		QuietHours:         p.str("NEWSLETTER_QUIET_HOURS", ""),
		DigestMaxPending:   p.integer("NEWSLETTER_DIGEST_MAX_PENDING", worker.DefaultMaxPendingBatches, 1),
		SendRate:           p.integer("NEWSLETTER_SEND_RATE", 50, 1),
		SMTPPool:           p.integer("NEWSLETTER_SMTP_POOL", 0, 0),
		GroupGrace:         p.duration("NEWSLETTER_GROUP_GRACE", 2*time.Minute, time.Second),
		GroupMaxDelay:      p.duration("NEWSLETTER_GROUP_MAX_DELAY", 15*time.Minute, time.Second),
		GroupMaxSize:       p.integer("NEWSLETTER_GROUP_MAX_SIZE", 50, 1),
		Shutdown:           p.duration("NEWSLETTER_SHUTDOWN_TIMEOUT", 30*time.Second, time.Second),
		TemplateDir:        p.str("NEWSLETTER_TEMPLATE_DIR", ""),
		TopicsFile:         p.str("NEWSLETTER_TOPICS_FILE", ""),
		DKIMKeyFile:        p.str("NEWSLETTER_DKIM_KEY_FILE", ""),
		DKIMSelector:       p.str("NEWSLETTER_DKIM_SELECTOR", ""),
		DKIMDomain:         p.str("NEWSLETTER_DKIM_DOMAIN", ""),
		MonitoringReadOnly: p.boolean("NEWSLETTER_MONITORING_READONLY", false),
		PrometheusURL:      p.str("NEWSLETTER_PROMETHEUS_URL", ""),
		PProf:              p.boolean("NEWSLETTER_PPROF", false),
		DevMailbox:         p.boolean("NEWSLETTER_DEV_MAILBOX", false),
		ConfirmCooldown:    p.duration("NEWSLETTER_CONFIRM_COOLDOWN", 10*time.Minute, 0),
		ConfirmRate:        p.integer("NEWSLETTER_CONFIRM_RATE", 600, 0),
		UnsubscribeByEmail: p.str("NEWSLETTER_UNSUBSCRIBE_BY_EMAIL", "immediate"),
		ConfirmSendAbove:   int64(p.integer("NEWSLETTER_CONFIRM_SEND_ABOVE", 1000, 0)),
		RequestTimeout:     p.duration("NEWSLETTER_REQUEST_TIMEOUT", 5*time.Second, 100*time.Millisecond),
		PollInterval:       p.duration("NEWSLETTER_POLL_INTERVAL", 5*time.Second, 10*time.Millisecond),
		ClaimTTL:           p.duration("NEWSLETTER_CLAIM_TTL", worker.DefaultClaimTTL, time.Second),
		RetryBase:          p.duration("NEWSLETTER_RETRY_BASE", worker.DefaultRetryBase, 10*time.Millisecond),
		SMTPHelo:           p.str("NEWSLETTER_SMTP_HELO", ""),
		BounceAddress:      p.str("NEWSLETTER_BOUNCE_ADDRESS", ""),
		BounceSMTPAddr:     p.str("NEWSLETTER_BOUNCE_SMTP_ADDR", ""),
		SoftBounceLimit:    p.integer("NEWSLETTER_SOFT_BOUNCE_LIMIT", store.DefaultSoftBounceLimit, 1),
		MailgunSigningKey:  p.str("NEWSLETTER_MAILGUN_SIGNING_KEY", ""),
		SendGridPublicKey:  p.str("NEWSLETTER_SENDGRID_PUBLIC_KEY", ""),
		PostmarkToken:      p.str("NEWSLETTER_POSTMARK_TOKEN", ""),
	}
	c.WebhookAllowPrivate = p.boolean("NEWSLETTER_WEBHOOK_ALLOW_PRIVATE", false)
	p.engagement(c)
	c.VAPID = p.vapid()
	c.FCM, c.FCMURL = p.fcm()
	c.APNs, c.APNsURL = p.apns()
	c.PushCAs = p.certPool("NEWSLETTER_PUSH_CA_FILE")
	c.FCMRate = p.integer("NEWSLETTER_FCM_RATE", 1000, 1)
	c.APNsRate = p.integer("NEWSLETTER_APNS_RATE", 1000, 1)
	c.DKIMEd25519KeyFile = p.str("NEWSLETTER_DKIM_ED25519_KEY_FILE", "")
	c.DKIMEd25519Selector = p.str("NEWSLETTER_DKIM_ED25519_SELECTOR", "")
	c.EmailTransport = strings.ToLower(p.str("NEWSLETTER_EMAIL_TRANSPORT", TransportSMTP))
	c.SESRegion = p.str("NEWSLETTER_SES_REGION", "")
	c.SESEndpoint = p.str("NEWSLETTER_SES_ENDPOINT", "")
	p.transport(c)
	c.PushConcurrency = p.integer("NEWSLETTER_PUSH_CONCURRENCY", 32, 1)
	c.WebhookConcurrency = p.integer("NEWSLETTER_WEBHOOK_CONCURRENCY", 16, 1)
	c.PushRate = p.integer("NEWSLETTER_PUSH_RATE", 1000, 1)
	c.WebhookRate = p.integer("NEWSLETTER_WEBHOOK_RATE", 100, 1)
	c.SMSConcurrency = p.integer("NEWSLETTER_SMS_CONCURRENCY", 8, 1)
	c.SMSRate = p.integer("NEWSLETTER_SMS_RATE", 10, 1)
	c.SMS = p.sms()
	// The embedded default is for trying things out: a first digest
	// should not wait for a postal address there.
	c.RequirePostalAddress = p.boolean("NEWSLETTER_REQUIRE_POSTAL_ADDRESS", !c.Embedded())
	var lerr error
	c.Lanes, lerr = tasks.ParseLanes(p.str("NEWSLETTER_LANES", strings.Join(tasks.Lanes, ",")))
	if lerr != nil {
		p.errs = append(p.errs, fmt.Errorf("NEWSLETTER_LANES: %w", lerr))
	}
	return c
}

// engagement reads how clicks and opens are counted.
func (p *parser) engagement(c *Config) {
	c.Engagement = engage.Mode(strings.ToLower(p.str("NEWSLETTER_ENGAGEMENT", string(engage.Aggregate))))
	p.check("NEWSLETTER_ENGAGEMENT", c.Engagement == engage.Aggregate || c.Engagement == engage.PerPerson || c.Engagement == engage.Off,
		"aggregate, per-person or off, got "+strconv.Quote(string(c.Engagement)))
	c.EngagementDays = p.integer("NEWSLETTER_ENGAGEMENT_DAYS", 90, 1)
	switch v := strings.ToLower(p.str("NEWSLETTER_OPENS", "off")); v {
	case "on":
		c.Opens = true
	case "off":
	default:
		p.check("NEWSLETTER_OPENS", false, "on or off, got "+strconv.Quote(v))
	}
	for _, n := range strings.Split(p.str("NEWSLETTER_ENGAGEMENT_SCANNER_NETS", ""), ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		pfx, err := netip.ParsePrefix(n)
		if err != nil {
			if a, aerr := netip.ParseAddr(n); aerr == nil {
				pfx, err = a.Prefix(a.BitLen())
			}
		}
		p.check("NEWSLETTER_ENGAGEMENT_SCANNER_NETS", err == nil, "comma-separated CIDRs or addresses, got "+strconv.Quote(n))
		if err == nil {
			c.ScannerNets = append(c.ScannerNets, pfx.Masked())
		}
	}
}

// providers checks the bounce address and the providers' keys.
func (p *parser) providers(c *Config) {
	for _, arn := range strings.Split(p.str("NEWSLETTER_SES_TOPIC_ARNS", ""), ",") {
		if arn = strings.TrimSpace(arn); arn != "" {
			p.check("NEWSLETTER_SES_TOPIC_ARNS", strings.HasPrefix(arn, "arn:aws:sns:") || strings.HasPrefix(arn, "arn:aws-cn:sns:"), "comma-separated SNS topic ARNs (arn:aws:sns:region:account:topic)")
			c.SESTopicARNs = append(c.SESTopicARNs, arn)
		}
	}
	if c.BounceAddress != "" {
		a, err := mail.ParseAddress(c.BounceAddress)
		p.check("NEWSLETTER_BOUNCE_ADDRESS", err == nil && a.Name == "" && !strings.Contains(a.Address, "+"), "a bare address without a + tag, such as bounces@bounces.example.com")
		if err == nil {
			c.BounceAddress = a.Address
		}
	}
	if c.SendGridPublicKey != "" {
		_, err := feedback.ParseSendGridKey(c.SendGridPublicKey)
		p.check("NEWSLETTER_SENDGRID_PUBLIC_KEY", err == nil, "the verification key SendGrid shows (base64 DER of an ECDSA public key)")
	}
}

// listeners checks the addresses the service listens on and connects to.
func (p *parser) listeners(c *Config) {
	if c.Addr == "" {
		c.Addr = DefaultAddr
		if c.Embedded() {
			c.Addr = DefaultEmbeddedAddr
		}
	}
	_, _, addrErr := net.SplitHostPort(c.Addr)
	p.check("NEWSLETTER_ADDR", addrErr == nil, "host:port or :port, such as 127.0.0.1:8080 or :8080")
	if c.MetricsAddr != "" {
		_, _, err := net.SplitHostPort(c.MetricsAddr)
		p.check("NEWSLETTER_METRICS_ADDR", err == nil && c.MetricsAddr != c.Addr, "host:port or :port other than NEWSLETTER_ADDR, such as 10.0.0.5:9090 or :9090")
	}
	if c.SMTPPool == 0 {
		c.SMTPPool = c.Concurrency
	}
	p.redis(c)
	if c.SMTPURL != "" {
		srv, err := mailer.ParseServerURL(c.SMTPURL)
		p.check("NEWSLETTER_SMTP_URL", err == nil, "smtp://[user:pass@]host:port[?tls=none|starttls|tls]")
		c.SMTP = &srv
	}
}

// redis parses the connection: the cluster when its seeds are given (the
// URL, if set too, is not read: Warnings says so), else the URL.
func (p *parser) redis(c *Config) {
	password := p.getenv("NEWSLETTER_REDIS_PASSWORD") // as given: spaces may be part of it
	if c.RedisClusterAddrs != "" {
		cl, err := redisconn.ParseCluster(c.RedisClusterAddrs, password)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("NEWSLETTER_REDIS_CLUSTER_ADDRS: %w; want comma-separated seed nodes, each host:port, redis://host:port or rediss://host:port (TLS)", err))
			return
		}
		c.Redis = cl
		return
	}
	// A password that is not used would leave the service connecting
	// without it and failing on NOAUTH, far from the mistake.
	p.check("NEWSLETTER_REDIS_PASSWORD", password == "", "NEWSLETTER_REDIS_CLUSTER_ADDRS set too: it is the cluster's password (one Redis takes it in NEWSLETTER_REDIS_URL, redis://:password@host:port)")
	if c.RedisURL != "" {
		opt, err := asynq.ParseRedisURI(c.RedisURL)
		p.check("NEWSLETTER_REDIS_URL", err == nil, "a redis://, rediss:// or redis-sentinel:// URL")
		c.Redis = opt
	}
}

// identity checks who the service is (From, the base URL, HELO, DKIM),
// its secrets and who may do what.
func (p *parser) identity(c *Config) {
	from, fromErr := mail.ParseAddress(c.From)
	p.check("NEWSLETTER_FROM", fromErr == nil, `an address such as "Newsletter <news@example.com>"`)
	u, err := url.Parse(c.BaseURL)
	p.check("NEWSLETTER_BASE_URL", err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "", "an http:// or https:// origin")
	if c.SMTPHelo == "" && err == nil {
		c.SMTPHelo = u.Hostname()
	}
	p.check("NEWSLETTER_SMTP_HELO", !strings.ContainsAny(c.SMTPHelo, " \t\r\n"), "a host name such as news.example.com")
	p.check("NEWSLETTER_SECRET", c.Secret != "" || c.Embedded(), "a secret (at least 16 characters) whenever NEWSLETTER_REDIS_URL or NEWSLETTER_REDIS_CLUSTER_ADDRS is set")
	p.check("NEWSLETTER_SECRET", c.Secret == "" || len(c.Secret) >= 16, "at least 16 characters")
	var cronErr error
	c.DigestSchedule, cronErr = cron.ParseStandard(c.DigestCron)
	p.check("NEWSLETTER_DIGEST_CRON", cronErr == nil, "a five-field cron expression such as \"0 9 * * 1\"")
	if c.QuietHours != "" {
		q, qerr := quiet.Parse(c.QuietHours)
		p.check("NEWSLETTER_QUIET_HOURS", qerr == nil, "HH:MM-HH:MM, e.g. 22:00-08:00")
		c.Quiet = &q
	}
	p.check("NEWSLETTER_UNSUBSCRIBE_BY_EMAIL", c.UnsubscribeByEmail == "immediate" || c.UnsubscribeByEmail == "confirm", "immediate or confirm")
	var perr error
	c.TestGate, perr = issues.NewTestGate(p.str("NEWSLETTER_TEST_RECIPIENTS", ""))
	p.check("NEWSLETTER_TEST_RECIPIENTS", perr == nil, fmt.Sprintf("comma-separated addresses (%v)", perr))
	c.Clients, perr = clientip.Parse(p.str("NEWSLETTER_TRUSTED_PROXIES", ""))
	p.check("NEWSLETTER_TRUSTED_PROXIES", perr == nil, "comma-separated CIDRs of your reverse proxies, such as 10.0.0.0/8")
	p.check("NEWSLETTER_ADMIN_TOKEN", c.AdminToken == "" || adminauth.CheckToken(c.AdminToken) == nil, adminauth.TokenRule)
	// The providers' webhook secrets that are passwords guard the
	// suppression list as the admin token guards the API, and are
	// guessed online the same way (slowed, not stopped): the same rule.
	// SendGrid's public key and the SES topics are no secrets.
	p.check("NEWSLETTER_POSTMARK_TOKEN", c.PostmarkToken == "" || adminauth.CheckToken(c.PostmarkToken) == nil, adminauth.TokenRule)
	p.check("NEWSLETTER_MAILGUN_SIGNING_KEY", c.MailgunSigningKey == "" || adminauth.CheckToken(c.MailgunSigningKey) == nil, adminauth.TokenRule)
	p.check("NEWSLETTER_DEV_MAILBOX", !c.DevMailbox || c.SMTPURL == "", "unset when NEWSLETTER_SMTP_URL is set")
	p.check("NEWSLETTER_DEV_MAILBOX", !c.DevMailbox || c.AdminToken != "" || c.Embedded(), "NEWSLETTER_ADMIN_TOKEN set too: with a real Redis the mailbox is served behind it")
	p.check("NEWSLETTER_PPROF", !c.PProf || c.AdminToken != "" || c.Embedded(), "NEWSLETTER_ADMIN_TOKEN set too: the profiles are served behind it")
	p.check("NEWSLETTER_BOUNCE_SMTP_ADDR", c.BounceSMTPAddr == "" || c.BounceAddress != "", "NEWSLETTER_BOUNCE_ADDRESS set too: the intake takes mail for that address only")
	if fromErr == nil {
		p.dkim(c, address.Domain(from.Address))
	}
}

// templates loads the topics file and checks the templates its steps
// name.
func (p *parser) templates(c *Config) {
	var terr error
	if c.Topics, terr = topics.Load(c.TopicsFile, c.WelcomeDelay); terr != nil {
		p.errs = append(p.errs, terr) // one line per mistake, each naming the variable
	} else if _, err := mailer.NewRenderer(c.TemplateDir, c.Topics.Templates()...); err != nil {
		// Every role checks the templates, not only the worker that
		// renders them: a step without one is found at start-up.
		p.errs = append(p.errs, fmt.Errorf("NEWSLETTER_TEMPLATE_DIR / NEWSLETTER_TOPICS_FILE: %w", err))
	}
}

// sesRegion is the form of an AWS region name: us-east-1, eu-central-2,
// us-gov-west-1, cn-northwest-1.
var sesRegion = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// transport checks the e-mail transport and the variables that belong to
// it: each transport's settings only with that transport, so a forgotten
// NEWSLETTER_EMAIL_TRANSPORT does not silently send another way.
func (p *parser) transport(c *Config) {
	switch c.EmailTransport {
	case TransportSMTP:
		p.check("NEWSLETTER_SES_REGION", c.SESRegion == "", "unset, or NEWSLETTER_EMAIL_TRANSPORT=ses")
		p.check("NEWSLETTER_SES_ENDPOINT", c.SESEndpoint == "", "unset, or NEWSLETTER_EMAIL_TRANSPORT=ses")
	case TransportSES:
		p.check("NEWSLETTER_SES_REGION", c.SESRegion != "", "the AWS region of your SES identities, such as eu-west-1, whenever NEWSLETTER_EMAIL_TRANSPORT=ses")
		p.check("NEWSLETTER_SES_REGION", c.SESRegion == "" || sesRegion.MatchString(c.SESRegion), fmt.Sprintf("an AWS region name such as eu-west-1, got %q", c.SESRegion))
		if c.SESEndpoint != "" {
			u, err := url.Parse(c.SESEndpoint)
			p.check("NEWSLETTER_SES_ENDPOINT", err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.RawQuery == "" && u.Fragment == "",
				"an https:// URL of the SES API, such as a VPC endpoint's")
		}
		p.check("NEWSLETTER_SMTP_URL", c.SMTPURL == "", "unset with NEWSLETTER_EMAIL_TRANSPORT=ses (mail goes through the SES API)")
		p.check("NEWSLETTER_DEV_MAILBOX", !c.DevMailbox, "unset with NEWSLETTER_EMAIL_TRANSPORT=ses (mail goes through the SES API)")
		p.check("NEWSLETTER_DKIM_ED25519_KEY_FILE", c.DKIMEd25519KeyFile == "",
			"unset with NEWSLETTER_EMAIL_TRANSPORT=ses: SES refuses a message with two DKIM-Signature fields (sign with the RSA key alone)")
	default:
		p.check("NEWSLETTER_EMAIL_TRANSPORT", false, fmt.Sprintf("smtp or ses, got %q", c.EmailTransport))
	}
}

// certPool is the system's certificates and those of the PEM file the
// variable name names (nil when it is not set).
func (p *parser) certPool(name string) *x509.CertPool {
	path := p.str(name, "")
	if path == "" {
		return nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	b, err := os.ReadFile(path)
	if err != nil || !pool.AppendCertsFromPEM(b) {
		p.check(name, false, "a readable PEM file of one or more certificates")
		return nil
	}
	return pool
}

// sms reads the SMS gateway's settings: NEWSLETTER_SMS_ACCOUNT_SID,
// _AUTH_TOKEN and _FROM together, or none of them (SMS off).
func (p *parser) sms() *SMS {
	c := &SMS{
		URL:            p.str("NEWSLETTER_SMS_URL", sms.DefaultBaseURL),
		AccountSID:     p.str("NEWSLETTER_SMS_ACCOUNT_SID", ""),
		AuthToken:      p.str("NEWSLETTER_SMS_AUTH_TOKEN", ""),
		From:           p.str("NEWSLETTER_SMS_FROM", ""),
		MaxSegments:    p.integer("NEWSLETTER_SMS_MAX_SEGMENTS", worker.DefaultSMSMaxSegments, 1),
		PerNumberDay:   p.integer("NEWSLETTER_SMS_PER_NUMBER_DAY", worker.DefaultSMSPerNumberDay, 1),
		PerDay:         p.integer("NEWSLETTER_SMS_PER_DAY", worker.DefaultSMSPerDay, 1),
		CodesPerClient: p.integer("NEWSLETTER_SMS_CODES_PER_CLIENT", sms.DefaultCodesPerClient, 1),
	}
	p.check("NEWSLETTER_SMS_URL", strings.HasPrefix(c.URL, "https://") || strings.HasPrefix(c.URL, "http://"), "an http(s) URL")
	vars := [][2]string{{"NEWSLETTER_SMS_ACCOUNT_SID", c.AccountSID}, {"NEWSLETTER_SMS_AUTH_TOKEN", c.AuthToken}, {"NEWSLETTER_SMS_FROM", c.From}}
	set := 0
	for _, v := range vars {
		if v[1] != "" {
			set++
		}
	}
	if set == 0 {
		return nil
	}
	if set != len(vars) {
		for _, v := range vars {
			p.check(v[0], v[1] != "", "set: SMS needs NEWSLETTER_SMS_ACCOUNT_SID, _AUTH_TOKEN and _FROM together (or none of them for no SMS)")
		}
		return nil
	}
	// A messaging service's id (MG…) is Twilio's, not a number.
	p.check("NEWSLETTER_SMS_FROM", strings.HasPrefix(c.From, "MG") || phone.IsSenderNumber(c.From),
		"the sending number in E.164 (+15005550006), a short code, or a messaging service's id (MG…)")
	c.Countries = p.smsCountries(c.From)
	return c
}

// smsCountries reads NEWSLETTER_SMS_COUNTRIES; unset, the country of the
// sending number, which is where a number's texts are cheap and lawful.
// A short code or a messaging service names no country: the list must
// then be given, so that SMS is never open to every country by default.
func (p *parser) smsCountries(from string) phone.Countries {
	list := p.str("NEWSLETTER_SMS_COUNTRIES", "")
	if list == "" {
		if country := phone.SenderCountry(from); country != "" {
			return phone.Countries{country}
		}
		p.check("NEWSLETTER_SMS_COUNTRIES", false,
			"set when NEWSLETTER_SMS_FROM is a short code or a messaging service (MG…): the ISO 3166 codes of the countries texts may go to (US,CA)")
		return nil
	}
	countries, err := phone.ParseCountries(list)
	if err != nil {
		p.check("NEWSLETTER_SMS_COUNTRIES", false, "comma-separated ISO 3166 country codes (US,CA): "+err.Error())
	}
	return countries
}

// APNs is the APNs identity: the provider key and what names it and the
// app.
type APNs struct {
	Key                  *ecdsa.PrivateKey
	KeyID, TeamID, Topic string
}

// fcm loads FCM's service account (NEWSLETTER_FCM_CREDENTIALS_FILE; none:
// FCM off) and its URL.
func (p *parser) fcm() (*fcm.Credentials, string) {
	path := p.str("NEWSLETTER_FCM_CREDENTIALS_FILE", "")
	url := p.str("NEWSLETTER_FCM_URL", fcm.DefaultBaseURL)
	p.check("NEWSLETTER_FCM_URL", strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://"), "an http(s) URL")
	if path == "" {
		return nil, url
	}
	c, err := fcm.LoadCredentials(path)
	if err != nil {
		p.check("NEWSLETTER_FCM_CREDENTIALS_FILE", false, "a Firebase service account's JSON key file: "+err.Error())
		return nil, url
	}
	return c, url
}

// apns loads the APNs provider key and its names: NEWSLETTER_APNS_KEY_FILE,
// _KEY_ID, _TEAM_ID and _TOPIC together, or none of them (APNs off).
func (p *parser) apns() (*APNs, string) {
	vars := [][2]string{
		{"NEWSLETTER_APNS_KEY_FILE", p.str("NEWSLETTER_APNS_KEY_FILE", "")},
		{"NEWSLETTER_APNS_KEY_ID", p.str("NEWSLETTER_APNS_KEY_ID", "")},
		{"NEWSLETTER_APNS_TEAM_ID", p.str("NEWSLETTER_APNS_TEAM_ID", "")},
		{"NEWSLETTER_APNS_TOPIC", p.str("NEWSLETTER_APNS_TOPIC", "")},
	}
	url := p.str("NEWSLETTER_APNS_URL", apns.DefaultBaseURL)
	p.check("NEWSLETTER_APNS_URL", strings.HasPrefix(url, "https://"), "an https URL (APNs speaks HTTP/2 over TLS)")
	set := 0
	for _, v := range vars {
		if v[1] != "" {
			set++
		}
	}
	if set == 0 {
		return nil, url
	}
	if set != len(vars) {
		for _, v := range vars {
			p.check(v[0], v[1] != "", "set: APNs needs NEWSLETTER_APNS_KEY_FILE, _KEY_ID, _TEAM_ID and _TOPIC together (or none of them for no APNs)")
		}
		return nil, url
	}
	key, err := apns.LoadKey(vars[0][1])
	if err != nil {
		p.check("NEWSLETTER_APNS_KEY_FILE", false, "Apple's .p8 push key (PEM, PKCS#8 P-256): "+err.Error())
		return nil, url
	}
	return &APNs{Key: key, KeyID: vars[1][1], TeamID: vars[2][1], Topic: vars[3][1]}, url
}

// vapid loads the web push identity: all three variables or none.
func (p *parser) vapid() *webpush.VAPID {
	pub := p.str("NEWSLETTER_VAPID_PUBLIC_KEY", "")
	priv := p.str("NEWSLETTER_VAPID_PRIVATE_KEY", "")
	subject := p.str("NEWSLETTER_VAPID_SUBJECT", "")
	set := 0
	for _, v := range []string{pub, priv, subject} {
		if v != "" {
			set++
		}
	}
	if set == 0 {
		return nil
	}
	if set != 3 {
		for _, v := range [][2]string{{"NEWSLETTER_VAPID_PUBLIC_KEY", pub}, {"NEWSLETTER_VAPID_PRIVATE_KEY", priv}, {"NEWSLETTER_VAPID_SUBJECT", subject}} {
			p.check(v[0], v[1] != "", "set: web push needs NEWSLETTER_VAPID_PUBLIC_KEY, NEWSLETTER_VAPID_PRIVATE_KEY and NEWSLETTER_VAPID_SUBJECT together (or none of them for no web push)")
		}
		return nil
	}
	v, err := webpush.NewVAPID(pub, priv, subject)
	switch {
	case err == nil:
		return v
	case errors.Is(err, webpush.ErrVAPIDPublicKey):
		p.check("NEWSLETTER_VAPID_PUBLIC_KEY", false, "the base64url public key that `newsletter vapid generate` prints (an uncompressed P-256 point)")
	case errors.Is(err, webpush.ErrVAPIDPrivateKey):
		p.check("NEWSLETTER_VAPID_PRIVATE_KEY", false, "the base64url private key that `newsletter vapid generate` prints (a 32-byte P-256 scalar)")
	case errors.Is(err, webpush.ErrVAPIDMismatch):
		p.check("NEWSLETTER_VAPID_PUBLIC_KEY", false, "the public key of NEWSLETTER_VAPID_PRIVATE_KEY: the two do not belong together (use the pair `newsletter vapid generate` printed)")
	case errors.Is(err, webpush.ErrVAPIDSubject):
		p.check("NEWSLETTER_VAPID_SUBJECT", false, "a contact for the push services: mailto:you@example.com or an https:// URL")
	default:
		p.errs = append(p.errs, fmt.Errorf("NEWSLETTER_VAPID_PUBLIC_KEY: %w", err))
	}
	return nil
}

// dkim checks the DKIM variables: each key with its selector, a second
// key only beside a first, and a signing domain that DMARC aligns with
// the From domain.
func (p *parser) dkim(c *Config, fromDomain string) {
	set := 0
	for _, v := range []string{c.DKIMKeyFile, c.DKIMSelector, c.DKIMDomain} {
		if v != "" {
			set++
		}
	}
	p.check("NEWSLETTER_DKIM_KEY_FILE", set == 0 || set == 3, "set together with NEWSLETTER_DKIM_SELECTOR and NEWSLETTER_DKIM_DOMAIN")
	p.check("NEWSLETTER_DKIM_ED25519_KEY_FILE", (c.DKIMEd25519KeyFile == "") == (c.DKIMEd25519Selector == ""),
		"set together with NEWSLETTER_DKIM_ED25519_SELECTOR")
	p.check("NEWSLETTER_DKIM_ED25519_KEY_FILE", c.DKIMEd25519KeyFile == "" || c.DKIMKeyFile != "",
		"set beside NEWSLETTER_DKIM_KEY_FILE (an RSA key: receivers that do not know Ed25519 check that signature)")
	for _, v := range [][2]string{{"NEWSLETTER_DKIM_SELECTOR", c.DKIMSelector}, {"NEWSLETTER_DKIM_ED25519_SELECTOR", c.DKIMEd25519Selector}} {
		p.check(v[0], v[1] == "" || address.DNSName(v[1]), "a DNS label such as nl2026 (the record is <selector>._domainkey.<domain>)")
	}
	p.check("NEWSLETTER_DKIM_ED25519_SELECTOR", c.DKIMEd25519Selector == "" || !strings.EqualFold(c.DKIMEd25519Selector, c.DKIMSelector),
		"a selector other than NEWSLETTER_DKIM_SELECTOR: each key has its own DNS record")
	if c.DKIMDomain == "" {
		return
	}
	c.DKIMDomain = strings.ToLower(strings.TrimSuffix(c.DKIMDomain, "."))
	p.check("NEWSLETTER_DKIM_DOMAIN", address.DKIMAligned(c.DKIMDomain, fromDomain),
		fmt.Sprintf("the domain of NEWSLETTER_FROM (%s) or a parent of it below the public suffix, got %s: DMARC passes only on a signature aligned with From", fromDomain, c.DKIMDomain))
}

// Warnings are settings that work but that an operator should know about.
func (c *Config) Warnings() []string {
	var w []string
	if strings.HasPrefix(c.BaseURL, "http://") {
		w = append(w, "NEWSLETTER_BASE_URL is http: mailbox providers ignore List-Unsubscribe links that are not https")
	}
	if strings.HasPrefix(c.SESEndpoint, "http://") {
		w = append(w, "NEWSLETTER_SES_ENDPOINT is http: every mail crosses the network unencrypted (fine for a local stand-in only)")
	}
	if c.RedisClusterAddrs != "" && c.RedisURL != "" {
		w = append(w, "NEWSLETTER_REDIS_CLUSTER_ADDRS and NEWSLETTER_REDIS_URL are both set: the cluster is used, NEWSLETTER_REDIS_URL is ignored")
	}
	if c.Embedded() {
		w = append(w, "NEWSLETTER_REDIS_URL is empty: using an embedded in-memory Redis, nothing survives a restart")
		if !Loopback(c.Addr) {
			w = append(w, "NEWSLETTER_ADDR "+c.Addr+" is not a loopback address: in embedded mode the dev mailbox, with every confirm and unsubscribe link, answers anyone who reaches it")
		}
	}
	return w
}

type parser struct {
	getenv func(string) string
	errs   []error
}

func (p *parser) str(name, def string) string {
	if v := strings.TrimSpace(p.getenv(name)); v != "" {
		return v
	}
	return def
}

func (p *parser) check(name string, ok bool, want string) {
	if !ok {
		p.errs = append(p.errs, fmt.Errorf("%s: want %s", name, want))
	}
}

func (p *parser) integer(name string, def, min int) int {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	p.check(name, err == nil && n >= min, fmt.Sprintf("a whole number >= %d, got %q", min, v))
	return n
}

func (p *parser) duration(name string, def, min time.Duration) time.Duration {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	p.check(name, err == nil && d >= min, fmt.Sprintf("a duration >= %s such as 5m or 30s, got %q", min, v))
	return d
}

func (p *parser) boolean(name string, def bool) bool {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	p.check(name, err == nil, fmt.Sprintf("true or false, got %q", v))
	return b
}
