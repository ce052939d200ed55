package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/mail"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/autopipe"
	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/internal/embedded"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/catalog"
	"github.com/newsletter/newsletter/services/engage"
	"github.com/newsletter/newsletter/services/presend"
	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/worker"
)

// app holds what every role shares: configuration, the Redis connection
// (or the embedded server), the store and the metrics registry.
type app struct {
	cfg *appConfig
	// links asks the issues' links for their pre-send checks, one
	// cache for the process (issueChecker).
	linkCheck *presend.LinkChecker
	linksOnce sync.Once
	// added are the channels added through the seam, built (addedChannels).
	added    []channels.Channel
	warnings []string
	log      *slog.Logger
	out      io.Writer
	rdb      redis.UniversalClient
	redisOpt asynq.RedisConnOpt
	emb      *embedded.Redis
	store    *store.Redis
	signer   *token.Signer
	// engage signs the counted links and hashes their readers
	// (internal/engage).
	engage *engage.Keys
	// tags trace mail to its subscriber in late bounces (VERP).
	tags *feedback.Tagger
	reg  *prometheus.Registry
	// audit records the changes the commands and the API make.
	audit *audit.Trail
	// guard checks the tokens and roles on every guarded route of the
	// process, so failed attempts count together.
	guard *adminauth.Guard
	// redact is the keyed hash of addresses in the logs and the audit log.
	redact *logredact.Redactor
	// settings are the newsletter's (name, From, postal address…), re-read
	// from Redis every few seconds by every role.
	settings *settings.Cache
	// catalog is the topics, sequence and templates in effect (stored,
	// edited at run time).
	catalog *catalog.Live
	// tokenGenerated: the admin token was made up at start (embedded
	// mode), so the banner may print it; a configured one never is.
	tokenGenerated bool
	closers        []func()
}

// newApp loads the configuration from getenv and connects to Redis. In
// embedded mode it starts the in-memory Redis and makes up the secrets.
func newApp(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) (*app, error) {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	if cfg.Embedded() && cfg.Secret == "" {
		cfg.Secret = randomHex(16)
	}
	// Addresses in the logs are pseudonyms keyed from the secret.
	redact := logredact.New([]byte(cfg.Secret))
	a := &app{cfg: cfg, warnings: cfg.Warnings(), out: stdout, redact: redact, log: slog.New(redact.Handler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))}
	opt, err := a.redisConnOpt()
	if err != nil {
		return nil, err
	}
	// Room for every pool this process may run (the lanes'), beside the API's.
	workers := 0
	for _, lane := range cfg.Lanes {
		workers += cfg.laneConcurrency(lane)
	}
	rdb, err := redisconn.Client(opt, workers)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.RedisVar(), err)
	}
	a.rdb, a.redisOpt = rdb, opt
	a.closers = append(a.closers, func() { closeLogged(a.log, "redis client", rdb) })
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pingCtx).Err(); err != nil {
		a.close()
		where := redisWhere(cfg.Config)
		if a.emb != nil {
			where = a.emb.URL() // no variable names it
		}
		return nil, fmt.Errorf("redis at %s: %w", where, err)
	}
	a.store = store.NewRedis(rdb).WithTopics(cfg.Topics).WithErasure(a.redact.Hash)
	// Every role and tool checks the data's version first: it stamps an
	// empty Redis and refuses data older or newer than this code reads,
	// with the way out in the error (store.CheckVersion).
	if err := a.store.CheckVersion(ctx, a.log); err != nil {
		a.close()
		return nil, fmt.Errorf("redis layout: %w", err)
	}
	if err := refuseOlderDigestRuns(ctx, a); err != nil {
		a.close()
		return nil, err
	}
	// The topics are the stored ones from here on, for every role and
	// command (the file is their first import).
	if a.catalog, err = openCatalog(ctx, a); err != nil {
		a.close()
		return nil, err
	}
	a.store = a.store.WithTopics(a.catalog).WithChannels(addedNames()...)
	if a.added, err = buildAdded(a, getenv); err != nil {
		a.close()
		return nil, err
	}
	a.signer = token.NewSigner([]byte(cfg.Secret), 0)
	a.engage = engage.NewKeys([]byte(cfg.Secret))
	a.tags = feedback.NewTagger([]byte(cfg.Secret))
	// The stored tokens (newsletter token create) beside the configured
	// one: looked up on every request, so a revocation holds at once.
	a.guard = adminauth.New(cfg.AdminToken, cfg.Clients.Key, nil).WithTokens(a.store)
	a.reg = prometheus.NewRegistry()
	a.audit = audit.NewTrail(a.store, redact, a.log, a.reg)
	a.settings = settings.NewCache(a.store, settings.Options{Defaults: settings.Defaults(cfg.From), RequirePostal: cfg.RequirePostalAddress, Log: a.log})
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// What this process's start-up moved into the current layout (0 on
	// data already in it): an operator sees the upgrade happen, and done.
	a.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "newsletter_store_upgraded_keys_total",
		Help: "Keys this process's start-up moved from an older Redis layout into the current one (store.CheckVersion).",
	}, func() float64 { return float64(store.UpgradedKeys()) }))
	return a, nil
}

// redisConnOpt is the Redis to connect to: the configured one, or in
// embedded mode an in-memory one started here, beside an admin token made
// up when none is set.
func (a *app) redisConnOpt() (asynq.RedisConnOpt, error) {
	if !a.cfg.Embedded() {
		return a.cfg.Redis, nil
	}
	emb, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a.emb = emb
	a.closers = append(a.closers, emb.Close)
	a.cfg.RedisURL = emb.URL()
	if a.cfg.AdminToken == "" {
		a.cfg.AdminToken = adminauth.NewToken()
		a.tokenGenerated = true
	}
	opt, err := asynq.ParseRedisURI(emb.URL())
	if err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	return opt, nil
}

// batchedRedis is a second connection to Redis whose single commands are
// sent in pipelines with those of concurrent requests (internal/autopipe):
// the API's request path is independent round trips that no caller can
// pipeline itself.
func (a *app) batchedRedis() (redis.UniversalClient, error) {
	c, err := redisconn.Client(a.redisOpt, a.cfg.Concurrency)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.cfg.RedisVar(), err)
	}
	h := autopipe.New(a.rdb, 4)
	c.AddHook(h)
	a.closers = append(a.closers, func() { h.Close(); closeLogged(a.log, "batched redis client", c) })
	return c, nil
}

// newClient is an asynq client on the app's connection. It owns nothing
// (asynq refuses to close a client on a shared connection): closing the
// app's connection ends it.
func (a *app) newClient() *asynq.Client {
	return asynq.NewClientFromRedisClient(a.rdb)
}

func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}

// newMailer is the SMTP pool, the Amazon SES API
// (NEWSLETTER_EMAIL_TRANSPORT=ses), or the dev mailbox (also returned as
// its web page) when no SMTP server is configured.
func (a *app) newMailer(ctx context.Context) (mailer.Mailer, http.Handler, error) {
	if a.cfg.EmailTransport == config.TransportSES {
		return a.newSESMailer(ctx)
	}
	if a.cfg.SMTP == nil {
		// The dev mailbox shows every confirm and unsubscribe link: on a
		// real Redis only when asked for, and behind the admin token.
		if a.emb == nil && !a.cfg.DevMailbox {
			return nil, nil, errors.New("NEWSLETTER_SMTP_URL: want an SMTP server whenever NEWSLETTER_REDIS_URL or NEWSLETTER_REDIS_CLUSTER_ADDRS is set (or NEWSLETTER_DEV_MAILBOX=true to keep mail in the dev mailbox, behind the admin token)")
		}
		box := mailer.NewMailbox(0)
		if a.emb == nil {
			return box, a.guard.Basic("newsletter dev mailbox", box), nil
		}
		return box, box, nil
	}
	signer, err := dkimSigner(a.cfg.Config)
	if err != nil {
		return nil, nil, err
	}
	pool, err := email.NewSMTP(email.SMTPOptions{Server: *a.cfg.SMTP, PoolSize: a.cfg.SMTPPool, Helo: a.cfg.SMTPHelo})
	if err != nil {
		return nil, nil, err
	}
	m, err := worker.NewSMTPEmail(mailer.ComposeOptions{
		From: a.cfg.From, ListID: listID(a.cfg.From), BounceAddress: a.cfg.BounceAddress,
	}, signer, pool)
	if err != nil {
		return nil, nil, errors.Join(err, pool.Close())
	}
	a.closers = append(a.closers, func() { closeLogged(a.log, "SMTP pool", m) })
	return m, nil, nil
}

// newSESMailer composes mail as the SMTP mailer does and sends its bytes
// through the SES v2 API, with credentials from the AWS SDK's default
// chain (checked here, so a missing role stops start-up).
func (a *app) newSESMailer(ctx context.Context) (mailer.Mailer, http.Handler, error) {
	signer, err := dkimSigner(a.cfg.Config)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ses, err := email.NewSES(ctx, email.SESOptions{
		Region: a.cfg.SESRegion, Endpoint: a.cfg.SESEndpoint, Conns: a.cfg.Concurrency,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("NEWSLETTER_EMAIL_TRANSPORT=ses: %w", err)
	}
	// The signatures leave out what SES rewrites (NewEmail).
	m, err := worker.NewEmail(mailer.ComposeOptions{
		From: a.cfg.From, ListID: listID(a.cfg.From), BounceAddress: a.cfg.BounceAddress,
	}, signer, ses)
	if err != nil {
		return nil, nil, err
	}
	a.log.Info("mail goes through the Amazon SES API", "region", a.cfg.SESRegion, "endpoint", a.cfg.SESEndpoint)
	return m, nil, nil
}

// dkimSigner reads the DKIM keys (nil: no signing). With two keys the
// first is RSA and the second Ed25519: both sign every mail, and a
// receiver that does not know Ed25519 checks the RSA signature.
func dkimSigner(cfg *config.Config) (*email.DKIM, error) {
	if cfg.DKIMKeyFile == "" {
		return nil, nil
	}
	key, err := email.ReadDKIMKey(cfg.DKIMKeyFile)
	if err != nil {
		return nil, fmt.Errorf("NEWSLETTER_DKIM_KEY_FILE: %w", err)
	}
	keys := []email.DKIMKey{{Selector: cfg.DKIMSelector, Key: key}}
	if cfg.DKIMEd25519KeyFile != "" {
		if alg := keys[0].Algorithm(); alg != "rsa" {
			return nil, fmt.Errorf("NEWSLETTER_DKIM_KEY_FILE: want an RSA key beside NEWSLETTER_DKIM_ED25519_KEY_FILE, %s holds %s", cfg.DKIMKeyFile, alg)
		}
		ed, err := email.ReadDKIMKey(cfg.DKIMEd25519KeyFile)
		if err != nil {
			return nil, fmt.Errorf("NEWSLETTER_DKIM_ED25519_KEY_FILE: %w", err)
		}
		k := email.DKIMKey{Selector: cfg.DKIMEd25519Selector, Key: ed}
		if alg := k.Algorithm(); alg != "ed25519" {
			return nil, fmt.Errorf("NEWSLETTER_DKIM_ED25519_KEY_FILE: want an Ed25519 key, %s holds %s", cfg.DKIMEd25519KeyFile, alg)
		}
		keys = append(keys, k)
	}
	d, err := email.NewDKIM(cfg.DKIMDomain, keys...)
	if err != nil {
		return nil, fmt.Errorf("NEWSLETTER_DKIM_KEY_FILE: %w", err)
	}
	return d, nil
}

// listID is the RFC 2919 List-Id for the From address: the display name
// and "newsletter.<domain>", so filters can tell our list from other mail
// of the same sender.
func listID(from string) string {
	addr, err := mail.ParseAddress(from)
	if err != nil {
		return ""
	}
	name := addr.Name
	if name == "" {
		name = "Newsletter"
	}
	return mime.QEncoding.Encode("utf-8", name) + " <newsletter." + address.Domain(addr.Address) + ">"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// closeLogged closes c at shutdown; a failure there loses nothing but is
// worth a line.
func closeLogged(log *slog.Logger, what string, c io.Closer) {
	if err := c.Close(); err != nil {
		log.Warn("close "+what, "err", err)
	}
}

// redisWhere names the configured Redis for messages, without its
// password: the variable in use and what it says.
func redisWhere(cfg *config.Config) string {
	if cl, ok := cfg.Redis.(redisconn.Cluster); ok {
		return cfg.RedisVar() + " " + cl.String()
	}
	return cfg.RedisVar() + " " + redactURL(cfg.RedisURL)
}

// redactURL hides a password in a Redis URL for logs.
func redactURL(u string) string {
	at := strings.LastIndex(u, "@")
	scheme := strings.Index(u, "://")
	if at < 0 || scheme < 0 {
		return u
	}
	return u[:scheme+3] + "***" + u[at:]
}

// note records a change a command made, by the person running it
// (audit.CLIActor). A failed write is logged whole and counted by the
// Trail; the change stands.
func (a *app) note(ctx context.Context, action, target, detail string) {
	_ = a.audit.Note(ctx, audit.Entry{Actor: audit.CLIActor(), Role: audit.CLIRole, Action: action, Target: target, Detail: detail}) // logged by the Trail
}
