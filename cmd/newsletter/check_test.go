package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/nettest"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/testkit/rediscluster"
	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

func runCheck(t *testing.T, env map[string]string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"check"}, func(k string) string { return env[k] }, &out, &errb)
	return code, out.String(), errb.String()
}

// TestCheckCommand: `newsletter check` says for Redis and the mail
// transport, each on a line, what works and what does not, and exits 1
// when anything fails: the env file's URL shape (user, password,
// tls=starttls) against a relay without STARTTLS or AUTH, a closed port,
// a Redis that is not there.
func TestCheckCommand(t *testing.T) {
	_, redisURL := redistest.Own(t, redistest.DBCommand)
	relay := smtptest.Start(t) // no STARTTLS, no AUTH
	refused := nettest.RefusedAddr(t)
	for _, c := range []struct {
		name    string
		env     map[string]string
		code    int
		want    []string
		mustNot string
	}{
		{name: "all well", env: realEnv(redisURL, relay.URL(), nil), code: 0,
			want: []string{"redis   ok    PING answered", "mail    ok    SMTP server " + relay.Addr + ": connected, EHLO (no mail sent)"}},
		{name: "no STARTTLS", env: realEnv(redisURL, "smtp://"+relay.Addr+"?tls=starttls", nil), code: 1,
			want: []string{"redis   ok", "mail    FAIL  NEWSLETTER_SMTP_URL: SMTP server " + relay.Addr + ": STARTTLS: the server offers no STARTTLS"}},
		{name: "no AUTH", env: realEnv(redisURL, "smtp://user:pass@"+relay.Addr+"?tls=none", nil), code: 1,
			want: []string{"mail    FAIL  NEWSLETTER_SMTP_URL: SMTP server " + relay.Addr + ": AUTH: the server offers no AUTH"}, mustNot: "pass@"},
		{name: "closed port", env: realEnv(redisURL, "smtp://"+refused+"?tls=none", nil), code: 1,
			want: []string{"mail    FAIL  NEWSLETTER_SMTP_URL: SMTP server " + refused + ": connect:", "refused"}},
		{name: "no Redis", env: realEnv("redis://"+refused+"/0", relay.URL(), nil), code: 1,
			want: []string{"redis   FAIL  NEWSLETTER_REDIS_URL redis://" + refused + "/0:", "mail    ok"}},
		{name: "no SMTP URL on a real Redis", env: realEnv(redisURL, "", nil), code: 1,
			want: []string{"mail    FAIL  NEWSLETTER_SMTP_URL: not set"}},
		{name: "dev mailbox", env: realEnv(redisURL, "", map[string]string{"NEWSLETTER_DEV_MAILBOX": "true", "NEWSLETTER_ADMIN_TOKEN": "check-test-admin-token-0123456789"}), code: 0,
			want: []string{"mail    ok    no NEWSLETTER_SMTP_URL: mail is kept in the dev mailbox"}},
		{name: "bad configuration", env: realEnv(redisURL, "ftp://x", nil), code: 1,
			want: []string{"config  FAIL", "NEWSLETTER_SMTP_URL"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCheck(t, c.env)
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the report lacks %q", w)
				}
			}
			if c.mustNot != "" && strings.Contains(out+errOut, c.mustNot) {
				t.Errorf("the report shows %q", c.mustNot)
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
			}
		})
	}
}

// TestStartSaysWhatIsWrongWithSMTP: a sending process checks its SMTP
// server as it starts and says in one error line what is wrong, naming
// the problem; it starts all the same (the server may be down for a
// minute), and says so when the server is fine.
func TestStartSaysWhatIsWrongWithSMTP(t *testing.T) {
	_, redisURL := redistest.Own(t, redistest.DBCommand)
	relay := smtptest.Start(t)
	refused := nettest.RefusedAddr(t)
	for _, c := range []struct {
		name, role, smtpURL string
		want                []string
	}{
		{"fine", "worker", relay.URL(), []string{"level=INFO", "mail server ok: SMTP server " + relay.Addr}},
		{"no STARTTLS", "serve", "smtp://" + relay.Addr + "?tls=starttls",
			[]string{"level=ERROR", "NEWSLETTER_SMTP_URL does not work with this server", "offers no STARTTLS"}},
		{"no AUTH", "worker", "smtp://user:pass@" + relay.Addr + "?tls=none",
			[]string{"level=ERROR", "NEWSLETTER_SMTP_URL does not work with this server", "offers no AUTH"}},
		{"down", "worker", "smtp://" + refused + "?tls=none",
			[]string{"level=ERROR", "cannot be reached now", "refused"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := startService(t, realEnv(redisURL, c.smtpURL, nil), c.role) // it listens: it started
			poll.Until(t, poll.BusyMachine, func() error {
				logs := svc.stderr.String()
				for _, w := range c.want {
					if !strings.Contains(logs, w) {
						return fmt.Errorf("the log lacks %q:\n%s", w, logs)
					}
				}
				return nil
			})
		})
	}
}

// TestCheckCluster: with NEWSLETTER_REDIS_CLUSTER_ADDRS, `newsletter check`
// names the cluster by its seeds (the password hidden) and answers for
// every primary; seeds that are not there fail the line, naming the
// variable.
func TestCheckCluster(t *testing.T) {
	parallel(t)
	c := rediscluster.Start(t)
	seeds := c.Addrs()
	env := realEnv("", "", map[string]string{
		"NEWSLETTER_REDIS_CLUSTER_ADDRS": "redis://" + seeds[0] + "," + strings.Join(seeds[1:], ","),
		"NEWSLETTER_DEV_MAILBOX":         "true", "NEWSLETTER_ADMIN_TOKEN": "check-test-admin-token-0123456789",
	})
	code, out, errOut := runCheck(t, env)
	want := "redis   ok    cluster at NEWSLETTER_REDIS_CLUSTER_ADDRS " + strings.Join(seeds, ",") + ": PING answered by its 3 primaries ("
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "cluster_state ok") {
		t.Errorf("exit %d, want 0 and %q in:\n%s\n%s", code, want, out, errOut)
	}
	t.Logf("the report on the cluster:\n%s", out)

	refused := nettest.RefusedAddr(t)
	env["NEWSLETTER_REDIS_CLUSTER_ADDRS"] = "redis://user:hidden-pw@" + refused
	code, out, errOut = runCheck(t, env)
	want = "redis   FAIL  NEWSLETTER_REDIS_CLUSTER_ADDRS " + refused + ":"
	if code != 1 || !strings.Contains(out, want) || strings.Contains(out+errOut, "hidden-pw") {
		t.Errorf("exit %d, want 1 and %q without the password in:\n%s\n%s", code, want, out, errOut)
	}
}
