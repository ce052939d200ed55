package config

import (
	"crypto/x509"
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
	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/clientip"
	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/robfig/cron/v3"
)

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
		FeedsInterval:      p.duration("NEWSLETTER_FEEDS_INTERVAL", p.defaults.FeedsInterval, 10*time.Second),
		Concurrency:        p.integer("NEWSLETTER_CONCURRENCY", 10, 1),
		SubscribeRate:      p.integer("NEWSLETTER_SUBSCRIBE_RATE", 10, 0),
		DigestBatch:        p.integer("NEWSLETTER_DIGEST_BATCH", p.defaults.DigestBatch, 1),
		QuietHours:         p.str("NEWSLETTER_QUIET_HOURS", ""),
		DigestMaxPending:   p.integer("NEWSLETTER_DIGEST_MAX_PENDING", p.defaults.DigestMaxPending, 1),
		SendRate:           p.integer("NEWSLETTER_SEND_RATE", 50, 1),
		SMTPPool:           p.integer("NEWSLETTER_SMTP_POOL", 0, 0),
		GroupGrace:         p.duration("NEWSLETTER_GROUP_GRACE", 2*time.Minute, time.Second),
		GroupMaxDelay:      p.duration("NEWSLETTER_GROUP_MAX_DELAY", 15*time.Minute, time.Second),
		GroupMaxSize:       p.integer("NEWSLETTER_GROUP_MAX_SIZE", 50, 1),
		Shutdown:           p.duration("NEWSLETTER_SHUTDOWN_TIMEOUT", 30*time.Second, time.Second),
		ClockOffset:        p.offset("NEWSLETTER_CLOCK_OFFSET", time.Hour),
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
		ClaimTTL:           p.duration("NEWSLETTER_CLAIM_TTL", p.defaults.ClaimTTL, time.Second),
		RetryBase:          p.duration("NEWSLETTER_RETRY_BASE", p.defaults.RetryBase, 10*time.Millisecond),
		SMTPHelo:           p.str("NEWSLETTER_SMTP_HELO", ""),
		BounceAddress:      p.str("NEWSLETTER_BOUNCE_ADDRESS", ""),
		BounceSMTPAddr:     p.str("NEWSLETTER_BOUNCE_SMTP_ADDR", ""),
		SoftBounceLimit:    p.integer("NEWSLETTER_SOFT_BOUNCE_LIMIT", p.defaults.SoftBounceLimit, 1),
		MailgunSigningKey:  p.str("NEWSLETTER_MAILGUN_SIGNING_KEY", ""),
		SendGridPublicKey:  p.str("NEWSLETTER_SENDGRID_PUBLIC_KEY", ""),
		PostmarkToken:      p.str("NEWSLETTER_POSTMARK_TOKEN", ""),
	}
	c.WebhookAllowPrivate = p.boolean("NEWSLETTER_WEBHOOK_ALLOW_PRIVATE", false)
	c.PushServices = p.hosts("NEWSLETTER_PUSH_SERVICES")
	p.engagement(c)
	p.vapid()
	c.FCMURL = p.fcm()
	c.APNsURL = p.apns()
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
	c.Media = p.media()
	// The embedded default is for trying things out: a first digest
	// should not wait for a postal address there.
	c.RequirePostalAddress = p.boolean("NEWSLETTER_REQUIRE_POSTAL_ADDRESS", !c.Embedded())
	p.parse(p.parsers.Lanes, p.str("NEWSLETTER_LANES", p.defaults.Lanes))
	return c
}

// engagement reads how clicks and opens are counted.
func (p *parser) engagement(c *Config) {
	p.parse(p.parsers.Engagement, strings.ToLower(p.str("NEWSLETTER_ENGAGEMENT", p.defaults.Engagement)))
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
		p.parse(p.parsers.SendGridKey, c.SendGridPublicKey)
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
	p.redisAck(c)
	if c.SMTPURL != "" {
		p.parse(p.parsers.SMTPServer, c.SMTPURL)
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

// redisAck reads how many replicas a change waits for, and how long.
func (p *parser) redisAck(c *Config) {
	c.RedisAckReplicas = p.integer("NEWSLETTER_REDIS_ACK_REPLICAS", AckReplicasDetect, 0)
	c.RedisAckTimeout = p.duration("NEWSLETTER_REDIS_ACK_TIMEOUT", 500*time.Millisecond, time.Millisecond)
	p.check("NEWSLETTER_REDIS_ACK_TIMEOUT", c.RedisAckTimeout <= MaxAckTimeout, fmt.Sprintf("at most %s, got %s", MaxAckTimeout, c.RedisAckTimeout))
	p.check("NEWSLETTER_REDIS_ACK_REPLICAS", c.RedisAckReplicas <= 0 || !c.Embedded(), "0 or unset without NEWSLETTER_REDIS_URL or NEWSLETTER_REDIS_CLUSTER_ADDRS: the embedded Redis has no replicas")
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
	p.parse(p.parsers.TestRecipients, p.str("NEWSLETTER_TEST_RECIPIENTS", ""))
	var perr error
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

// templates loads the topics file and has the templates its steps name
// checked: every role checks them, not only the worker that renders
// them, so a step without one is found at start-up.
func (p *parser) templates(c *Config) {
	var terr error
	if c.Topics, terr = topics.Load(c.TopicsFile, c.WelcomeDelay); terr != nil {
		p.errs = append(p.errs, terr) // one line per mistake, each naming the variable
	} else if p.parsers.Templates != nil {
		if err := p.parsers.Templates(c.TemplateDir, c.Topics); err != nil {
			p.errs = append(p.errs, err)
		}
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

// hosts reads a comma-separated list of host names, each of which may
// begin with a dot (the hosts under it); empty: nil.
func (p *parser) hosts(name string) []string {
	var out []string
	for _, h := range strings.Split(p.str(name, ""), ",") {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			continue
		}
		if strings.Trim(h, ".") == "" || strings.ContainsAny(h, "/:@ *") {
			p.check(name, false, "comma-separated host names (a leading dot takes the hosts under it), not "+strconv.Quote(h))
			continue
		}
		out = append(out, h)
	}
	return out
}
