package config

import (
	"crypto/x509"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/robfig/cron/v3"

	"github.com/newsletter/newsletter/internal/clientip"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/phone"
	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/topics"
)

// Config is every plain setting of the service (the components' own
// types are parsed by Parsers, outside). Zero values are never used:
// Parse fills defaults.
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
	SMTPURL      string // empty: dev mailbox
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
	// ClockOffset (NEWSLETTER_CLOCK_OFFSET, a testing knob) is added to
	// the worker's clock where it decides whether something is due: the
	// soak skews one worker with it (a static Go binary ignores
	// libfaketime).
	ClockOffset time.Duration
	TemplateDir string
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
	// ConfirmSendAbove is NEWSLETTER_CONFIRM_SEND_ABOVE: the audience
	// above which the console asks the publisher to type it.
	ConfirmSendAbove int64
	// Media is where the images uploaded into issues are kept.
	Media Media
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
	// EngagementDays is how long per-person engagement keeps each
	// person's clicks (NEWSLETTER_ENGAGEMENT_DAYS; the mode itself,
	// NEWSLETTER_ENGAGEMENT, is the engage package's type: Parsers).
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
	// FCMURL is Firebase Cloud Messaging's origin (NEWSLETTER_FCM_URL,
	// default Defaults.FCMURL; tests point it at a fake). The web push
	// identity (NEWSLETTER_VAPID_*) and FCM's key
	// (NEWSLETTER_FCM_CREDENTIALS_FILE) are their packages' types:
	// Parsers.
	FCMURL string
	// FCMRate and APNsRate are each platform's own rate inside the push
	// lane, shared by every push worker (NEWSLETTER_FCM_RATE,
	// NEWSLETTER_APNS_RATE, per second).
	FCMRate, APNsRate int
	// APNsURL is Apple's push service's origin (NEWSLETTER_APNS_URL,
	// default Defaults.APNsURL); its key (NEWSLETTER_APNS_KEY_FILE, with
	// _KEY_ID, _TEAM_ID and _TOPIC) is the apns package's: Parsers.
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
	// PushServices are the hosts a browser's push subscription may name
	// (NEWSLETTER_PUSH_SERVICES, comma-separated; ".example.com" takes the
	// hosts under it); nil: the browsers' own (the webpush package's
	// list). WebhookAllowPrivate lifts the list with the address check.
	PushServices []string
	// Each lane (NEWSLETTER_LANES, the tasks package's list: Parsers) has
	// its own pool: Concurrency is the e-mail lane's, PushConcurrency and
	// WebhookConcurrency the others'; PushRate and WebhookRate are their
	// shared rates per second (SendRate is e-mail's).
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

	// RedisAckReplicas is how many replicas must have a change before the
	// API answers for it (NEWSLETTER_REDIS_ACK_REPLICAS; 0: none),
	// AckReplicasDetect when unset: one when the primaries have replicas
	// at start, else none. RedisAckTimeout bounds that wait
	// (NEWSLETTER_REDIS_ACK_TIMEOUT): past it the answer is 503.
	RedisAckReplicas int
	RedisAckTimeout  time.Duration
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
	// Defaults.SMSCodesPerClient).
	CodesPerClient int
}

// Endpoints is the check for the URLs that browsers (push) and admins
// (webhooks) hand in, at registration and at connect time.
func (c *Config) Endpoints() netguard.Guard {
	return netguard.Guard{AllowPrivate: c.WebhookAllowPrivate}
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

// AckReplicasDetect is RedisAckReplicas when NEWSLETTER_REDIS_ACK_REPLICAS
// is unset: the service looks at the primaries' replicas at start.
const AckReplicasDetect = -1

// MaxAckTimeout bounds NEWSLETTER_REDIS_ACK_TIMEOUT: every change's
// answer may wait that long, and a wait of seconds is an outage hidden
// in a slow page, not a safety margin. It also stays below the Redis
// clients' read timeout (go-redis's 3 s), within which the answer to the
// WAIT is read (redisconn.Acker).
const MaxAckTimeout = 2 * time.Second

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

// Parse reads the environment through getenv (os.Getenv when nil), with
// the components' defaults d, handing the settings whose types belong to
// components to parsers. The error, if any, has one line per bad
// variable.
func Parse(getenv func(string) string, d Defaults, parsers Parsers) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	p := parser{getenv: getenv, defaults: d, parsers: parsers}
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

// Media is where the images uploaded into issues are kept: the folder
// NEWSLETTER_MEDIA_DIR (default "media", beside the working directory),
// served by GET /media/{name}; or, when NEWSLETTER_MEDIA_S3_ENDPOINT is
// set, an S3-compatible bucket (API replicas share nothing else).
type Media struct {
	Dir                                   string
	S3Endpoint, S3Bucket, S3Region        string
	S3AccessKey, S3SecretKey, S3PublicURL string
}
