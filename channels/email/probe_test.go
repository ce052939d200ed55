package email

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels/email/smtptest"
	"github.com/newsletter/newsletter/internal/testkit/nettest"
)

// probeServer is a Server for addr with the URL's tls mode and user.
func probeServer(t *testing.T, addr, mode, user, pass string) Server {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return Server{Host: host, Port: n, TLS: mode, Username: user, Password: pass}
}

// TestProbe: against real SMTP servers with and without STARTTLS and
// AUTH, the probe names the step that fails and why, in the terms of the
// URL; and it fails exactly when the SMTP mailer, configured the same,
// cannot send (its verdict is the mailer's, not a guess).
func TestProbe(t *testing.T) {
	plain := smtptest.Start(t)
	plainAuth := smtptest.StartWith(t, smtptest.Options{Username: "relay", Password: "s3cret"})
	secure := smtptest.StartWith(t, smtptest.Options{STARTTLS: true, Username: "relay", Password: "s3cret"})
	for _, c := range []struct {
		name       string
		srv        *smtptest.Server
		mode       string
		user, pass string
		tls        *tls.Config
		step       string // "": the probe passes
		is         error
		code       int
		text       string
	}{
		{name: "plain relay, tls=none", srv: plain, mode: "none"},
		{name: "plain relay, tls=starttls", srv: plain, mode: "starttls", step: ProbeSTARTTLS, is: ErrNoSTARTTLS, text: "tls=none"},
		{name: "no AUTH offered, a user given", srv: plain, mode: "none", user: "relay", pass: "s3cret", step: ProbeAUTH, is: ErrNoAUTH},
		{name: "AUTH PLAIN without TLS", srv: plainAuth, mode: "none", user: "relay", pass: "s3cret", step: ProbeAUTH, is: ErrNoAuthMechanism, text: "only go over TLS"},
		{name: "STARTTLS and AUTH", srv: secure, mode: "starttls", user: "relay", pass: "s3cret", tls: secure.ClientTLS()},
		{name: "wrong password", srv: secure, mode: "starttls", user: "relay", pass: "wrong", tls: secure.ClientTLS(), step: ProbeAUTH, is: ErrAuthRefused, code: 535},
		{name: "untrusted certificate", srv: secure, mode: "starttls", user: "relay", pass: "s3cret", step: ProbeSTARTTLS, text: "certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			server := probeServer(t, c.srv.Addr, c.mode, c.user, c.pass)
			err := Probe(context.Background(), server, ProbeOptions{TLSConfig: c.tls, Helo: "news.example.com", Timeout: time.Minute})
			if c.step == "" {
				if err != nil {
					t.Fatalf("probe: %v", err)
				}
			} else {
				var pe *ProbeError
				if !errors.As(err, &pe) || pe.Step != c.step || (c.is != nil && !errors.Is(err, c.is)) || pe.Code != c.code ||
					!strings.Contains(err.Error(), c.text) || !strings.Contains(err.Error(), c.srv.Addr) {
					t.Fatalf("probe: %#v (%v), want step %s, %v, code %d, text %q", pe, err, c.step, c.is, c.code, c.text)
				}
				if pe.Temporary() {
					t.Errorf("%v counts as temporary; it is the configuration", err)
				}
			}

			m, merr := NewSMTP(SMTPOptions{Server: server, TLSConfig: c.tls, Timeout: time.Minute})
			if merr != nil {
				t.Fatal(merr)
			}
			defer m.Close()
			sendErr := sendTest(context.Background(), m, "ann@example.org")
			if (sendErr == nil) != (err == nil) {
				t.Fatalf("the probe says %v, the mailer's send %v", err, sendErr)
			}
		})
	}
}

// TestProbeRefused: nothing listens; the probe says so at the connect
// step, as an outage that may pass.
func TestProbeRefused(t *testing.T) {
	addr := nettest.RefusedAddr(t)
	err := Probe(context.Background(), probeServer(t, addr, "starttls", "", ""), ProbeOptions{Timeout: time.Minute})
	var pe *ProbeError
	if !errors.As(err, &pe) || pe.Step != ProbeConnect || !pe.Temporary() || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("probe of a closed port: %v", err)
	}
}
