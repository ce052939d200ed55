package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/internal/redisconn"
)

// checkTimeout bounds each check of `newsletter check` and of start-up: a
// server that answers nothing in that time is as good as down.
const checkTimeout = 30 * time.Second

// checkCmd is `newsletter check`: the configuration, Redis and the mail
// transport, each on a line, as the service would meet them. It changes
// nothing (no data version stamped, no mail) and fails if any check fails.
func checkCmd(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		fmt.Fprintf(stdout, "config  FAIL  %v\n", err)
		return errors.New("the configuration is invalid")
	}
	fmt.Fprintln(stdout, "config  ok")
	failed := 0
	report := func(what string, err error, ok string) {
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "%-7s FAIL  %v\n", what, err)
			return
		}
		fmt.Fprintf(stdout, "%-7s ok    %s\n", what, ok)
	}
	redisOK, err := checkRedis(ctx, cfg.Config)
	report("redis", err, redisOK)
	mailOK, err := checkMail(ctx, cfg)
	report("mail", err, mailOK)
	if failed > 0 {
		return fmt.Errorf("%d of the checks failed", failed)
	}
	return nil
}

// checkRedis pings the configured Redis: one Redis (or Sentinel's
// primary), or every primary of a cluster.
func checkRedis(ctx context.Context, cfg *config.Config) (string, error) {
	if cfg.Embedded() {
		return "none configured (NEWSLETTER_REDIS_URL and NEWSLETTER_REDIS_CLUSTER_ADDRS unset): the service would run on an in-memory Redis that forgets everything at exit", nil
	}
	rdb, err := redisconn.Client(cfg.Redis, 0)
	if err != nil {
		return "", fmt.Errorf("%s: %w", cfg.RedisVar(), err)
	}
	defer func() { _ = rdb.Close() }() // a client that only pinged: nothing to lose
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if cl, ok := rdb.(*redis.ClusterClient); ok {
		primaries, err := checkCluster(ctx, cl)
		if err != nil {
			return "", fmt.Errorf("%s: %w", redisWhere(cfg), err)
		}
		return fmt.Sprintf("cluster at %s: PING answered by its %d primaries (%s), cluster_state ok", redisWhere(cfg), len(primaries), strings.Join(primaries, ", ")), nil
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		return "", fmt.Errorf("%s: %w", redisWhere(cfg), err)
	}
	return "PING answered at " + redactURL(cfg.RedisURL), nil
}

// checkCluster pings every primary the cluster names, and asks each
// whether the cluster is whole (cluster_state:ok): a cluster with slots
// no primary serves answers PING and refuses those slots' keys. It
// returns the primaries' addresses, sorted.
func checkCluster(ctx context.Context, rdb *redis.ClusterClient) ([]string, error) {
	var (
		mu        sync.Mutex
		primaries []string
	)
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		addr := m.Options().Addr
		if err := m.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("primary %s: %w", addr, err)
		}
		info, err := m.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("primary %s: CLUSTER INFO: %w", addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("primary %s: the cluster is not whole (cluster_state is not ok: a slot has no primary)", addr)
		}
		mu.Lock()
		primaries = append(primaries, addr)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(primaries) == 0 {
		return nil, errors.New("the seeds name no primary")
	}
	slices.Sort(primaries)
	return primaries, nil
}

// checkMail checks the mail transport the worker would send through.
func checkMail(ctx context.Context, cfg *appConfig) (string, error) {
	switch {
	case cfg.EmailTransport == config.TransportSES:
		// The SES mailer's own start-up check: the AWS configuration
		// loads and credentials are found. No call is made to SES.
		ctx, cancel := context.WithTimeout(ctx, checkTimeout)
		defer cancel()
		if _, err := email.NewSES(ctx, email.SESOptions{Region: cfg.SESRegion, Endpoint: cfg.SESEndpoint}); err != nil {
			return "", fmt.Errorf("NEWSLETTER_EMAIL_TRANSPORT=ses: %w", err)
		}
		return "Amazon SES in " + cfg.SESRegion + ": AWS credentials found (not tried against SES: the first mail does that)", nil
	case cfg.SMTP == nil && (cfg.Embedded() || cfg.DevMailbox):
		return "no NEWSLETTER_SMTP_URL: mail is kept in the dev mailbox, not sent", nil
	case cfg.SMTP == nil:
		return "", errors.New("NEWSLETTER_SMTP_URL: not set, and a worker on a real Redis needs it (or NEWSLETTER_DEV_MAILBOX=true)")
	}
	if err := email.Probe(ctx, *cfg.SMTP, email.ProbeOptions{Helo: cfg.SMTPHelo, Timeout: checkTimeout}); err != nil {
		return "", fmt.Errorf("NEWSLETTER_SMTP_URL: %w", err)
	}
	return smtpSummary(cfg.SMTP), nil
}

// smtpSummary says what a passed probe did.
func smtpSummary(s *email.Server) string {
	out := "SMTP server " + net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) + ": connected, EHLO"
	switch s.TLS {
	case "starttls":
		out += ", STARTTLS"
	case "tls":
		out = "SMTP server " + net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) + ": connected over TLS, EHLO"
	}
	if s.Username != "" {
		out += ", AUTH as " + s.Username
	}
	return out + " (no mail sent)"
}

// probeSMTPAtStart checks the SMTP server once as a sending process
// starts, in the background, and says loudly what is wrong. It does not
// stop start-up: a server that is down now may be up in a minute, and
// mail waits in the queue meanwhile; but a server that refuses what the
// URL asks for (no STARTTLS, no AUTH, credentials refused) will refuse
// every mail until the URL changes, and the line says so.
func probeSMTPAtStart(ctx context.Context, cfg *appConfig, log *slog.Logger) {
	err := email.Probe(ctx, *cfg.SMTP, email.ProbeOptions{Helo: cfg.SMTPHelo, Timeout: checkTimeout})
	var pe *email.ProbeError
	switch {
	case err == nil:
		log.Info("mail server ok: " + smtpSummary(cfg.SMTP))
	case ctx.Err() != nil:
		// Stopped before the answer came: nothing was learnt.
	case errors.As(err, &pe) && !pe.Temporary():
		log.Error("NEWSLETTER_SMTP_URL does not work with this server: no mail will go out until it is fixed (newsletter check tells again)", "err", err)
	default:
		log.Error("the SMTP server cannot be reached now: mail waits in the queue and is retried (newsletter check tells again)", "err", err)
	}
}
