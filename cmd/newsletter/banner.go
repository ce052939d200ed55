package main

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/internal/health"
)

// localURL is the http URL of a listening address; a wildcard host is
// reached as localhost.
func localURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// withOwnBaseURL is getenv for a process that serves the API: without
// NEWSLETTER_BASE_URL its links (in mails, invites, the archive's feed)
// lead to the address it listens on (NEWSLETTER_ADDR, or the mode's
// default), where the default http://localhost:8080 would send a reader
// of a service on another port nowhere. A port the system picks (:0) is
// not known before the listener opens: the default stays then.
func withOwnBaseURL(getenv func(string) string) func(string) string {
	if strings.TrimSpace(getenv("NEWSLETTER_BASE_URL")) != "" {
		return getenv
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return getenv // newApp reads it again and says what is wrong
	}
	own := localURL(cfg.Addr)
	if u, err := url.Parse(own); err != nil || u.Port() == "0" {
		return getenv
	}
	return func(k string) string {
		if k == "NEWSLETTER_BASE_URL" {
			return own
		}
		return getenv(k)
	}
}

// opsHandler serves what every non-API role needs: probes, metrics (nil:
// served on a listener of their own), and the dev mailbox of a worker
// without SMTP.
func opsHandler(a *app, metrics, mailbox http.Handler) http.Handler {
	mux := http.NewServeMux()
	health.Register(mux, a.store)
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	if a.cfg.PProf {
		mux.Handle("/debug/pprof/", pprofHandler(a.guard))
	}
	if mailbox != nil {
		mux.Handle("GET /dev/mailbox", mailbox)
	}
	return mux
}

// reachedAs is the URL to print for a listening address: NEWSLETTER_BASE_URL
// when it names the same loopback endpoint (embedded mode listens on
// 127.0.0.1:8080 and links to http://localhost:8080), else localURL.
func (a *app) reachedAs(listen string) string {
	own := localURL(listen)
	ou, err1 := url.Parse(own)
	bu, err2 := url.Parse(a.cfg.BaseURL)
	if err1 == nil && err2 == nil && bu.Scheme == "http" && bu.Path == "" && ou.Port() == bu.Port() &&
		config.Loopback(ou.Host) && config.Loopback(bu.Host) {
		return a.cfg.BaseURL
	}
	return own
}

// banner prints, in a few lines, where to look: at the address this
// process listens on, and where mails link to when that differs.
func (a *app) banner(r roles, listen, metricsListen string, devMailbox bool) {
	base := a.reachedAs(listen)
	fmt.Fprintf(a.out, "newsletter %s listening on %s\n", r, listen)
	if base != a.cfg.BaseURL {
		fmt.Fprintf(a.out, "  links in mails   %s   (NEWSLETTER_BASE_URL)\n", a.cfg.BaseURL)
	}
	if r.api {
		fmt.Fprintf(a.out, "  signup form      %s/\n", base)
		fmt.Fprintf(a.out, "  console          %s/admin/   (sign in with an account, or an admin, editor or viewer token)\n", base)
		where := "another terminal"
		if a.emb != nil {
			where += ", after the export line below"
		}
		fmt.Fprintf(a.out, "  first account    bin/newsletter account create --email you@example.org --role admin   (%s; prints a link where you set a password and an authenticator app)\n", where)
	}
	if devMailbox {
		fmt.Fprintf(a.out, "  dev mailbox      %s/dev/mailbox   (no NEWSLETTER_SMTP_URL: mail is kept here, not sent)\n", base)
	}
	switch {
	case r.api && a.tokenGenerated:
		fmt.Fprintf(a.out, "  monitoring       %s/monitoring/   (user admin, password %s)\n", base, a.cfg.AdminToken)
		fmt.Fprintf(a.out, "  admin API        Authorization: Bearer %s\n", a.cfg.AdminToken)
	case r.api && a.cfg.AdminToken != "":
		fmt.Fprintf(a.out, "  monitoring       %s/monitoring/   (user admin, password: NEWSLETTER_ADMIN_TOKEN)\n", base)
	}
	fmt.Fprintf(a.out, "  metrics          %s/metrics\n", a.reachedAs(metricsListen))
	if a.emb != nil {
		// BASE_URL too: `account create` in that terminal prints an
		// invite link, which must lead here.
		fmt.Fprintf(a.out, "  other terminals  export NEWSLETTER_REDIS_URL=%s NEWSLETTER_SECRET=%s NEWSLETTER_BASE_URL=%s\n", a.emb.URL(), a.cfg.Secret, a.cfg.BaseURL)
		fmt.Fprintf(a.out, "  embedded Redis in memory: nothing is durable, nothing survives a restart\n")
		if !a.cfg.RequirePostalAddress {
			fmt.Fprintf(a.out, "  postal address   not required here (NEWSLETTER_REQUIRE_POSTAL_ADDRESS is off in embedded mode); set the newsletter's at %s/admin/settings\n", base)
		}
	}
}
