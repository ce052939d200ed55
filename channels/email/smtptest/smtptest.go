// Package smtptest runs a real SMTP server (emersion/go-smtp) on a loopback
// port inside a test, records what it accepts, and can be scripted per
// recipient to refuse, defer or drop the connection, so delivery code is
// tested over TCP against the protocol it will meet in production. By
// default it offers neither STARTTLS nor AUTH; StartWith turns them on.
package smtptest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/newsletter/newsletter/internal/testkit/poll"
)

// Message is one accepted mail.
type Message struct {
	From   string
	To     []string
	Data   []byte
	Header mail.Header
	At     time.Time
	// Helo is the name the client gave in EHLO or HELO.
	Helo string
	// QueueID is the id the server named the mail by in its answer
	// (Options.QueueIDs), "" otherwise.
	QueueID string
}

// Fault is what the server does to one attempt for one recipient.
type Fault struct {
	// AtData answers Err after the body instead of at RCPT.
	AtData bool
	// Err is the reply. It must be returned unwrapped, or go-smtp loses
	// the code.
	Err *smtp.SMTPError
	// Drop closes the connection halfway through DATA.
	Drop bool
}

// Script decides the fate of the attempt-th try (from 1) for rcpt; nil
// accepts.
type Script func(rcpt string, attempt int) *Fault

// Server is a running test SMTP server.
type Server struct {
	Addr string

	mu       sync.Mutex
	script   Script
	delay    time.Duration
	msgs     []Message
	attempts map[string]int
	sessions int
	conns    []*smtp.Conn
	srv      *smtp.Server
	opts     Options
	// roots trusts the certificate of a STARTTLS server.
	roots *x509.CertPool
}

// Options turn on what a real relay may offer.
type Options struct {
	// STARTTLS offers STARTTLS with a certificate for 127.0.0.1 and
	// localhost that only ClientTLS trusts.
	STARTTLS bool
	// Username and Password, when set, offer AUTH PLAIN (over plain text
	// too, as some relays do): those credentials are taken, others are
	// answered 535, and MAIL before a successful AUTH is answered 530.
	Username, Password string
	// QueueIDs answers an accepted mail "250 2.0.0 Ok: queued as <id>", as
	// Postfix does, instead of go-smtp's "250 2.0.0 OK: queued".
	QueueIDs bool
}

// Start runs a server until the test ends: plain SMTP, no STARTTLS, no
// AUTH.
func Start(t testing.TB) *Server { t.Helper(); return StartWith(t, Options{}) }

// StartWith runs a server with what o turns on until the test ends.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{attempts: map[string]int{}, opts: o}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		s.mu.Lock()
		s.sessions++
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		x := &session{srv: s, conn: c}
		if o.Username != "" {
			return &authSession{session: x}, nil
		}
		return x, nil
	}))
	if o.STARTTLS {
		cert, roots, err := selfSigned()
		if err != nil {
			t.Fatalf("smtptest: certificate: %v", err)
		}
		s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		s.roots = roots
	}
	s.srv.Domain = "localhost"
	s.srv.AllowInsecureAuth = true
	s.srv.ReadTimeout = 30 * time.Second
	s.srv.WriteTimeout = 30 * time.Second
	s.srv.MaxRecipients = 100
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("smtptest: listen: %v", err)
	}
	s.Addr = l.Addr().String()
	go func() { _ = s.srv.Serve(l) }() // returns when Close stops it
	t.Cleanup(func() {
		// Shutdown first: it stops listening and waits for the clients
		// to hang up. go-smtp v0.26.0's Close tears down a connection
		// whose client is still in BDAT and races with that connection's
		// reading goroutine (a -race report in make test-stress), so
		// Close is only the fallback for a client that never hangs up.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if s.srv.Shutdown(ctx) == nil {
			return
		}
		if err := s.srv.Close(); err != nil {
			t.Logf("smtptest: close: %v", err)
		}
	})
	return s
}

// URL is a NEWSLETTER_SMTP_URL that reaches the server.
func (s *Server) URL() string { return "smtp://" + s.Addr + "?tls=none" }

// ClientTLS is a client's TLS configuration that trusts the server's
// certificate (nil without STARTTLS).
func (s *Server) ClientTLS() *tls.Config {
	if s.roots == nil {
		return nil
	}
	return &tls.Config{RootCAs: s.roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// selfSigned is a certificate for the loopback names, and a pool that
// trusts it.
func selfSigned() (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: bigOne, Subject: pkix.Name{CommonName: "smtptest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, roots, nil
}

var bigOne = big.NewInt(1)

// SetScript replaces the script.
func (s *Server) SetScript(fn Script) { s.mu.Lock(); s.script = fn; s.mu.Unlock() }

// SetDelay makes every DATA take d, like a slow gateway.
func (s *Server) SetDelay(d time.Duration) { s.mu.Lock(); s.delay = d; s.mu.Unlock() }

// Messages returns what was accepted so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Attempts is how often rcpt was tried (RCPT commands seen).
func (s *Server) Attempts(rcpt string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[strings.ToLower(rcpt)]
}

// DropConnections closes every connection the server has, as a gateway
// does with idle ones or when it restarts; it returns once they are closed.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Conn().Close() // one the client closed already fails; either way it is gone
	}
}

// Sessions is how many connections were opened.
func (s *Server) Sessions() int { s.mu.Lock(); defer s.mu.Unlock(); return s.sessions }

// WaitFor polls until at least n messages arrived or the timeout passes,
// and returns what arrived.
func (s *Server) WaitFor(t testing.TB, n int, timeout time.Duration) []Message {
	t.Helper()
	var msgs []Message
	poll.Until(t, timeout, func() error {
		if msgs = s.Messages(); len(msgs) < n {
			return fmt.Errorf("smtptest: %d of %d messages", len(msgs), n)
		}
		return nil
	})
	return msgs
}

// To returns the accepted messages for rcpt.
func (s *Server) To(rcpt string) []Message {
	var out []Message
	for _, m := range s.Messages() {
		for _, to := range m.To {
			if strings.EqualFold(to, rcpt) {
				out = append(out, m)
			}
		}
	}
	return out
}

type session struct {
	srv    *Server
	conn   *smtp.Conn
	from   string
	to     []string
	faults []*Fault
	authed bool
}

func (x *session) Reset()        { x.from, x.to, x.faults = "", nil, nil }
func (x *session) Logout() error { return nil }

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	if x.srv.opts.Username != "" && !x.authed {
		return &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Authentication required"}
	}
	x.from = from
	return nil
}

// authSession is a session of a server with AUTH: go-smtp offers AUTH to
// sessions that implement smtp.AuthSession.
type authSession struct{ *session }

func (x *authSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (x *authSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != x.srv.opts.Username || password != x.srv.opts.Password {
			return smtp.ErrAuthFailed // 535 5.7.8
		}
		x.authed = true
		return nil
	}), nil
}

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.srv.mu.Lock()
	key := strings.ToLower(to)
	x.srv.attempts[key]++
	n, script := x.srv.attempts[key], x.srv.script
	x.srv.mu.Unlock()
	var f *Fault
	if script != nil {
		f = script(to, n)
	}
	if f != nil && !f.AtData && !f.Drop && f.Err != nil {
		return f.Err
	}
	x.to = append(x.to, to)
	x.faults = append(x.faults, f)
	return nil
}

func (x *session) Data(r io.Reader) error {
	for _, f := range x.faults {
		if f != nil && f.Drop {
			// Part of the body arrives, then the connection drops: the
			// fault being simulated, so neither result matters.
			_, _ = io.CopyN(io.Discard, r, 64)
			_ = x.conn.Conn().Close()
			return io.ErrUnexpectedEOF
		}
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	x.srv.mu.Lock()
	delay := x.srv.delay
	x.srv.mu.Unlock()
	time.Sleep(delay)
	for _, f := range x.faults {
		if f != nil && f.AtData && f.Err != nil {
			return f.Err
		}
	}
	msg := Message{From: x.from, To: x.to, Data: body, At: time.Now(), Helo: x.conn.Hostname()}
	if m, err := mail.ReadMessage(bytes.NewReader(body)); err == nil {
		msg.Header = m.Header
	}
	x.srv.mu.Lock()
	if x.srv.opts.QueueIDs {
		msg.QueueID = fmt.Sprintf("4Q%08X", len(x.srv.msgs)+1)
	}
	x.srv.msgs = append(x.srv.msgs, msg)
	x.srv.mu.Unlock()
	if msg.QueueID != "" {
		// go-smtp answers a Data that returns an *SMTPError with its
		// code and text, a 250 as well.
		return &smtp.SMTPError{Code: 250, EnhancedCode: smtp.EnhancedCode{2, 0, 0}, Message: "Ok: queued as " + msg.QueueID}
	}
	return nil
}

// Text returns the decoded text/plain part, as a mail client shows it.
func (m Message) Text() string { return m.part("text/plain") }

// HTML returns the decoded text/html part.
func (m Message) HTML() string { return m.part("text/html") }

func (m Message) part(want string) string {
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		return ""
	}
	return findPart(textproto.MIMEHeader(msg.Header), msg.Body, want)
}

func findPart(h textproto.MIMEHeader, body io.Reader, want string) string {
	ct, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		ct = "text/plain"
	}
	if strings.HasPrefix(ct, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return ""
			}
			if s := findPart(p.Header, p, want); s != "" {
				return s
			}
		}
	}
	if ct != want {
		return ""
	}
	var r io.Reader = body
	switch strings.ToLower(h.Get("Content-Transfer-Encoding")) {
	case "quoted-printable":
		r = quotedprintable.NewReader(body)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, body)
	}
	b, _ := io.ReadAll(r)
	return string(b)
}
