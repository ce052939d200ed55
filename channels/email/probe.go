package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	gosmtp "github.com/wneessen/go-mail/smtp"
)

// The steps of a probe, in order: ProbeError.Step.
const (
	ProbeConnect  = "connect"  // TCP, and the TLS handshake of tls=tls
	ProbeGreeting = "greeting" // the server's 220
	ProbeEHLO     = "EHLO"
	ProbeSTARTTLS = "STARTTLS"
	ProbeAUTH     = "AUTH"
)

// What a server lacks that the URL asks for: the configuration and the
// server disagree, and no retry can help.
var (
	// ErrNoSTARTTLS: tls=starttls (the default), and the server does not
	// offer STARTTLS after EHLO.
	ErrNoSTARTTLS = errors.New("the server offers no STARTTLS, but the URL asks for it (tls=starttls, the default): for a relay without TLS say ?tls=none; for TLS from the first byte (port 465) ?tls=tls")
	// ErrNoAUTH: the URL has a user and password, and the server does not
	// offer AUTH (on this connection).
	ErrNoAUTH = errors.New("the server offers no AUTH, but the URL has a user and password: leave them out for a relay that takes mail without AUTH")
	// ErrNoAuthMechanism: the server offers AUTH, but no mechanism the
	// mailer uses on this connection (PLAIN and LOGIN only under TLS).
	ErrNoAuthMechanism = errors.New("the server offers no AUTH mechanism the mailer uses here")
	// ErrAuthRefused: the server refused the user and password (535 and
	// the like).
	ErrAuthRefused = errors.New("the server refused the user and password")
)

// ProbeError says which step of a probe failed, and how.
type ProbeError struct {
	Addr string // host:port
	Step string // ProbeConnect, ProbeGreeting, ProbeEHLO, ProbeSTARTTLS or ProbeAUTH
	// Code is the server's reply code, 0 when it gave none (a network
	// error, or a capability it does not offer).
	Code int
	Err  error
}

func (e *ProbeError) Error() string {
	return fmt.Sprintf("SMTP server %s: %s: %v", e.Addr, e.Step, e.Err)
}

func (e *ProbeError) Unwrap() error { return e.Err }

// Temporary tells an outage (no connection, a timeout, a 4xx reply) that
// may pass by itself from a configuration the server will refuse every
// time (no STARTTLS, no AUTH, credentials refused, a certificate that
// does not verify).
func (e *ProbeError) Temporary() bool {
	if e.Code != 0 {
		return e.Code/100 == 4
	}
	switch {
	case errors.Is(e.Err, ErrNoSTARTTLS), errors.Is(e.Err, ErrNoAUTH), errors.Is(e.Err, ErrNoAuthMechanism):
		return false
	}
	var cert *tls.CertificateVerificationError
	return !errors.As(e.Err, &cert)
}

// probeReply is a server's refusal as it sent it (textproto.Error
// quotes the text).
type probeReply struct {
	code int
	msg  string
}

func (r *probeReply) Error() string { return strconv.Itoa(r.code) + " " + r.msg }

// ProbeOptions are what a probe takes beside the server.
type ProbeOptions struct {
	// Helo is the name in EHLO (default: the machine's name, as the
	// mailer's).
	Helo string
	// TLSConfig overrides the TLS settings (tests trust a self-signed
	// server); default: verify the server's certificate for its host.
	TLSConfig *tls.Config
	// Timeout bounds the whole probe (default 30 s).
	Timeout time.Duration
}

// Probe does with srv what the SMTP mailer does before its first mail,
// step by step: connect (with TLS at once for tls=tls), read the
// greeting, EHLO, STARTTLS for tls=starttls, and AUTH when the URL has a
// user, choosing the mechanism as the mailer does (go-mail's discovery:
// SCRAM, NTLM or CRAM-MD5, and PLAIN or LOGIN only under TLS). It sends
// no mail and ends with QUIT. An error is a *ProbeError naming the step.
func Probe(ctx context.Context, srv Server, o ProbeOptions) error {
	addr := net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port))
	fail := func(step string, err error) error {
		pe := &ProbeError{Addr: addr, Step: step, Err: err}
		var te *textproto.Error
		var pr *probeReply
		switch {
		case errors.As(err, &pr):
			pe.Code = pr.code
		case errors.As(err, &te):
			pe.Code = te.Code
		}
		return pe
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	tlsConfig := o.TLSConfig
	if tlsConfig == nil {
		tlsConfig = &tls.Config{ServerName: srv.Host, MinVersion: tls.VersionTLS12}
	}
	helo := o.Helo
	if helo == "" {
		helo = machineName()
	}

	var dialer interface {
		DialContext(ctx context.Context, network, addr string) (net.Conn, error)
	} = &net.Dialer{}
	if srv.TLS == "tls" {
		dialer = &tls.Dialer{Config: tlsConfig}
	}
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fail(ProbeConnect, err)
	}
	// The context's deadline bounds every read and write; cancelling it
	// (the process stops) closes the connection.
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		_ = conn.Close() // the error that matters is the deadline's
		return fail(ProbeConnect, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() }) // ends a blocked read; the read reports it
	defer stop()

	c, err := gosmtp.NewClient(conn, srv.Host)
	if err != nil {
		_ = conn.Close() // the greeting failed: nothing to say goodbye to
		return fail(ProbeGreeting, err)
	}
	defer func() { _ = c.Close() }()      // after QUIT, or after a failure: either way the probe is over
	if err := c.Hello(helo); err != nil { // sends EHLO (HELO if refused) now
		return fail(ProbeEHLO, err)
	}
	encrypted := srv.TLS == "tls"
	if srv.TLS == "starttls" {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return fail(ProbeSTARTTLS, ErrNoSTARTTLS)
		}
		if err := c.StartTLS(tlsConfig); err != nil {
			return fail(ProbeSTARTTLS, err)
		}
		encrypted = true
	}
	if srv.Username != "" {
		if err := probeAuth(c, srv, encrypted); err != nil {
			return fail(ProbeAUTH, err)
		}
	}
	// Everything asked for worked; a server that hangs up before it
	// answers QUIT takes mail all the same.
	_ = c.Quit()
	return nil
}

// machineName is the mailer's default name in EHLO (go-mail's): the
// machine's host name.
func machineName() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "localhost"
}

// probeAuth authenticates on c as the mailer would: the mechanism is
// go-mail's SMTPAuthAutoDiscover choice from what the server offers.
func probeAuth(c *gosmtp.Client, srv Server, encrypted bool) error {
	ok, offered := c.Extension("AUTH")
	if !ok {
		return ErrNoAUTH
	}
	mechs := strings.Fields(strings.ToUpper(offered))
	prefer := []string{"SCRAM-SHA-256-PLUS", "SCRAM-SHA-256", "SCRAM-SHA-1-PLUS", "SCRAM-SHA-1", "NTLM", "CRAM-MD5", "PLAIN", "LOGIN"}
	if !encrypted {
		prefer = []string{"SCRAM-SHA-256", "SCRAM-SHA-1", "NTLM", "CRAM-MD5"}
	}
	i := slices.IndexFunc(prefer, func(m string) bool { return slices.Contains(mechs, m) })
	if i < 0 {
		why := ""
		if !encrypted {
			why = "; PLAIN and LOGIN only go over TLS: use ?tls=starttls or ?tls=tls"
		}
		return fmt.Errorf("%w: it offers %s%s", ErrNoAuthMechanism, offered, why)
	}
	var a gosmtp.Auth
	switch prefer[i] {
	case "SCRAM-SHA-256-PLUS", "SCRAM-SHA-1-PLUS":
		state, err := c.GetTLSConnectionState()
		if err != nil {
			return err
		}
		if prefer[i] == "SCRAM-SHA-256-PLUS" {
			a = gosmtp.ScramSHA256PlusAuth(srv.Username, srv.Password, state)
		} else {
			a = gosmtp.ScramSHA1PlusAuth(srv.Username, srv.Password, state)
		}
	case "SCRAM-SHA-256":
		a = gosmtp.ScramSHA256Auth(srv.Username, srv.Password)
	case "SCRAM-SHA-1":
		a = gosmtp.ScramSHA1Auth(srv.Username, srv.Password)
	case "NTLM":
		a = gosmtp.NTLMAuth(srv.Username, srv.Password, "")
	case "CRAM-MD5":
		a = gosmtp.CRAMMD5Auth(srv.Username, srv.Password)
	case "PLAIN":
		a = gosmtp.PlainAuth("", srv.Username, srv.Password, srv.Host, false)
	case "LOGIN":
		a = gosmtp.LoginAuth(srv.Username, srv.Password, srv.Host, false)
	}
	if err := c.Auth(a); err != nil {
		var te *textproto.Error
		if errors.As(err, &te) && te.Code/100 == 5 {
			return fmt.Errorf("%w (AUTH %s): %w", ErrAuthRefused, prefer[i], &probeReply{code: te.Code, msg: te.Msg})
		}
		return fmt.Errorf("%s: %w", prefer[i], err)
	}
	return nil
}
