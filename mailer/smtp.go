package mailer

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	gomail "github.com/wneessen/go-mail"

	"github.com/newsletter/newsletter/internal/address"
)

// SMTPOptions configure an SMTP mailer.
type SMTPOptions struct {
	Server Server
	From   string // "Name <addr>"
	// PoolSize is the most connections open at once (default 4).
	PoolSize int
	// IdleTimeout closes connections unused this long (default 30s), below
	// the 5 minutes after which RFC 5321 lets a server drop us.
	IdleTimeout time.Duration
	// Timeout bounds each SMTP command (default 30s).
	Timeout time.Duration
	// TLSConfig overrides the TLS settings (tests use it to trust a
	// self-signed server).
	TLSConfig *tls.Config
	// ListID names the list in a List-Id header on every mail with an
	// unsubscribe link ("Newsletter <news.example.com>").
	ListID string
	// DKIM signs every message when set (channels/email's NewDKIM).
	DKIM Signer
	// Helo is the name in EHLO (default: go-mail's, the machine's name).
	// Once mail leaves a relay, a bare machine name costs spam points.
	Helo string
	// BounceAddress is the envelope sender, with each message's Tag after
	// a '+' (VERP), so a late bounce names its mail; empty: From.
	BounceAddress string
	// Log takes what an operator should hear of (default slog.Default()).
	Log *slog.Logger

	// dial replaces the dialler (tests count the writes on a connection).
	dial gomail.DialContextFunc
}

// SMTP delivers mail through a pool of reused SMTP connections: a
// connection carries many messages (with RSET only after a refused
// recipient), is replaced when it breaks, and is closed when idle.
type SMTP struct {
	client *gomail.Client // configuration only; connections are pooled
	from   string
	// envelopeFrom is the From address, the envelope sender without a
	// BounceAddress.
	envelopeFrom string
	domain       string
	listID       string
	dkim         Signer
	bounce       string
	idleFor      time.Duration
	timeout      time.Duration
	log          *slog.Logger
	// date is the last Date value made (encode.go).
	date atomic.Pointer[dateField]
	// Tests turn the server's extensions off to take the other paths.
	noPipelining, noChunking bool
	// noFeedbackID: the transport writes its own Feedback-ID (SES), and
	// a second one of ours, unsigned there, would only confuse a
	// mailbox provider's feedback loop.
	noFeedbackID bool

	slots chan struct{} // one per open connection
	idle  chan *pooledConn
	stop  chan struct{}
	wg    sync.WaitGroup
	now   func() time.Time
}

// NewSMTP returns a pooled SMTP mailer. It dials lazily, so a mail server
// that is down at start-up delays mail instead of stopping the service.
func NewSMTP(o SMTPOptions) (*SMTP, error) {
	from, err := mail.ParseAddress(o.From)
	if err != nil {
		return nil, fmt.Errorf("smtp: from %q: %w", o.From, err)
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 4
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 30 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	opts := []gomail.Option{
		gomail.WithPort(o.Server.Port),
		gomail.WithTimeout(o.Timeout),
		// The pool replaces broken connections itself; a NOOP before and
		// an RSET after every message would double the round trips.
		gomail.WithoutNoop(),
		gomail.WithoutRset(),
	}
	switch o.Server.TLS {
	case "none":
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	case "tls":
		opts = append(opts, gomail.WithSSL())
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if o.TLSConfig != nil {
		opts = append(opts, gomail.WithTLSConfig(o.TLSConfig))
	}
	if o.dial != nil {
		opts = append(opts, gomail.WithDialContextFunc(o.dial))
	}
	if o.Helo != "" {
		opts = append(opts, gomail.WithHELO(o.Helo))
	}
	if o.Server.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(o.Server.Username), gomail.WithPassword(o.Server.Password))
	}
	client, err := gomail.NewClient(o.Server.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("smtp: %w", err)
	}
	s := &SMTP{
		client:       client,
		from:         from.String(),
		envelopeFrom: from.Address,
		domain:       address.Domain(from.Address),
		listID:       o.ListID,
		dkim:         o.DKIM,
		bounce:       o.BounceAddress,
		idleFor:      o.IdleTimeout,
		timeout:      o.Timeout,
		log:          cmp.Or(o.Log, slog.Default()),
		slots:        make(chan struct{}, o.PoolSize),
		idle:         make(chan *pooledConn, o.PoolSize),
		stop:         make(chan struct{}),
		now:          time.Now,
	}
	s.wg.Add(1)
	go s.reapIdle()
	return s, nil
}

// Send implements Mailer. It borrows a pooled connection for one message.
func (s *SMTP) Send(ctx context.Context, msg *Message) error {
	pc, reused, err := s.get(ctx)
	if err != nil {
		return &SendError{Class: Temporary, Domain: address.Domain(msg.To), Err: fmt.Errorf("connect: %w", err)}
	}
	pc, err = s.sendOn(ctx, pc, reused, msg)
	if pc != nil {
		s.put(pc)
	}
	return err
}

// Session holds one pooled connection for a run of messages, such as a
// digest batch; Close returns it to the pool.
type Session interface {
	Mailer
	Close() error
}

// Opener is a Mailer that can hand out a Session.
type Opener interface {
	Open(ctx context.Context) (Session, error)
}

// Open implements Opener.
func (s *SMTP) Open(ctx context.Context) (Session, error) {
	pc, reused, err := s.get(ctx)
	if err != nil {
		return nil, &SendError{Class: Temporary, Err: fmt.Errorf("connect: %w", err)}
	}
	return &smtpSession{smtp: s, pc: pc, reused: reused}, nil
}

type smtpSession struct {
	smtp   *SMTP
	pc     *pooledConn // nil after the connection broke
	reused bool
}

func (x *smtpSession) Send(ctx context.Context, msg *Message) error {
	if x.pc == nil {
		pc, err := x.smtp.dial(ctx)
		if err != nil {
			return &SendError{Class: Temporary, Domain: address.Domain(msg.To), Err: fmt.Errorf("reconnect: %w", err)}
		}
		x.pc, x.reused = pc, false
	}
	var err error
	x.pc, err = x.smtp.sendOn(ctx, x.pc, x.reused, msg)
	x.reused = true
	return err
}

// encodesPrepared: SMTP and its sessions write a prepared mail from its
// encoded template (Prepared.RenderFor).
func (s *SMTP) encodesPrepared()        {}
func (x *smtpSession) encodesPrepared() {}

func (x *smtpSession) Close() error {
	if x.pc != nil {
		x.smtp.put(x.pc)
		x.pc = nil
	}
	return nil
}

// sendOn sends msg over pc and returns the connection to keep using, or nil
// when it was closed because its protocol state is unknown.
func (s *SMTP) sendOn(ctx context.Context, pc *pooledConn, reused bool, msg *Message) (*pooledConn, error) {
	domain := address.Domain(msg.To)
	env, data, err := s.message(msg, pc.msg[:0])
	if err != nil {
		return pc, &SendError{Class: Invalid, Domain: domain, Err: err}
	}
	pc.msg = data[:0]
	err = s.transact(pc, env, data)
	if err != nil && reused && noReply(err) {
		// The server closed an idle connection: one more try on a fresh
		// one (see noReply).
		s.discard(pc)
		if pc, err = s.dial(ctx); err != nil {
			return nil, &SendError{Class: Temporary, Domain: domain, Err: fmt.Errorf("reconnect: %w", err)}
		}
		err = s.transact(pc, env, data)
	}
	if err == nil {
		pc.lastUsed = s.now()
		return pc, nil
	}
	se := classify(err, domain)
	if connBroken(err) {
		s.discard(pc)
		return nil, se
	}
	return pc, se
}

// message returns msg's envelope and its bytes as they go to the server,
// appended to buf: encoded from its prepared template (encode.go) or
// written by go-mail, and signed when DKIM is on.
func (s *SMTP) message(msg *Message, buf []byte) (envelope, []byte, error) {
	env := envelope{from: s.envelopeFrom, to: msg.To}
	if msg.From != "" {
		// The settings' From: bounces come back to it as they would to
		// the configured one.
		a, err := mail.ParseAddress(msg.From)
		if err != nil {
			return env, nil, fmt.Errorf("from %q: %w", msg.From, err)
		}
		env.from = a.Address
	}
	if s.bounce != "" {
		env.from = returnPath(s.bounce, msg.Tag)
	}
	if err := env.valid(); err != nil {
		return env, nil, err
	}
	if msg.MessageID == "" {
		msg.MessageID = newMessageID(msg.Tag, s.domain)
	}
	if msg.Date.IsZero() {
		msg.Date = s.now()
	}
	data, t, err := s.encode(msg, buf)
	if err != nil || s.dkim == nil {
		return env, data, err
	}
	end := bytes.Index(data, []byte("\r\n\r\n"))
	if end < 0 {
		return env, nil, errors.New("dkim: the message has no empty line after its header")
	}
	header, body := data[:end+2], data[end+4:]
	var bh []byte
	if t != nil {
		bh = t.bodyHash(s.dkim, body) // from the template's shared beginning
	} else {
		bh = bodyHash(s.dkim, body)
	}
	sig, err := s.dkim.SignHashed(header, bh)
	if err != nil {
		return env, nil, err
	}
	// The signature's fields go in front of the header: the message
	// moves up by their length.
	data = append(data, sig...)
	copy(data[len(sig):], data[:len(data)-len(sig)])
	copy(data, sig)
	return env, data, nil
}

// writeGoMail appends msg as go-mail writes it.
func (s *SMTP) writeGoMail(msg *Message, buf []byte) ([]byte, error) {
	m, err := s.build(msg)
	if err != nil {
		return nil, err
	}
	b := bytes.NewBuffer(buf)
	if _, err := m.WriteTo(b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// build makes go-mail's message of msg (without DKIM: message signs the
// bytes).
func (s *SMTP) build(msg *Message) (*gomail.Msg, error) {
	// No User-Agent or X-Mailer: a library's banner tells a spam filter
	// and an attacker what sent the mail, and nothing a reader needs.
	m := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	from := s.from
	if msg.From != "" {
		from = msg.From
	}
	if err := m.From(from); err != nil {
		return nil, err
	}
	if msg.ReplyTo != "" {
		if err := m.ReplyTo(msg.ReplyTo); err != nil {
			return nil, err
		}
	}
	to, err := toAddress(msg.ToName, msg.To)
	if err != nil {
		return nil, err
	}
	m.ToMailAddress(to)
	if msg.ReplyTo != "" {
		if err := m.ReplyTo(msg.ReplyTo); err != nil {
			return nil, fmt.Errorf("reply-to: %w", err)
		}
	}
	if msg.boundary != "" {
		m.SetBoundary(msg.boundary)
	}
	m.Subject(msg.Subject)
	m.SetMessageIDWithValue(msg.MessageID)
	m.SetDateWithValue(msg.Date)
	for k, v := range listHeaders(msg, s.listID) {
		m.SetGenHeader(gomail.Header(k), v)
	}
	if msg.Kind != "" && !s.noFeedbackID {
		m.SetGenHeader("Feedback-ID", feedbackID(msg.Kind, s.domain))
	}
	if autoSubmitted[msg.Kind] {
		m.SetGenHeader("Auto-Submitted", "auto-generated")
	}
	if bulk[msg.Kind] {
		m.SetGenHeader("Precedence", "bulk")
	}
	m.SetBodyString(gomail.TypeTextPlain, msg.Text)
	if msg.HTML != "" {
		m.AddAlternativeString(gomail.TypeTextHTML, msg.HTML)
	}
	return m, nil
}

// autoSubmitted are the kinds of mail a form sends on its own when
// someone types an address (a confirmation, an unsubscribe link): RFC 3834
// marks them so that a vacation responder or a ticket system does not
// answer them, and a mail loop cannot start between two robots.
var autoSubmitted = map[string]bool{KindConfirm: true, KindUnsubscribe: true, KindPreferences: true, KindInvite: true}

// bulk are the kinds that go to a list at once (an issue, the digest,
// an event bundle): "Precedence: bulk" tells an auto-responder not to
// answer and a receiver that the mail is a list's. A transactional mail
// (autoSubmitted) is never bulk.
var bulk = map[string]bool{KindIssue: true, KindDigest: true, KindEvents: true}

// toAddress is the To of a mail to addr for a person called name. The
// name is kept as typed and net/mail's Address.String writes it (go-mail
// calls it for the header): as a quoted string with its quotes and
// backslashes escaped, or as RFC 2047 encoded words. go-mail's
// AddToFormat pastes the name between quotes unescaped, so a name with a
// quote or a backslash came out mangled, or made every mail to that
// person fail as invalid.
//
// The errors quote neither the name nor the address: they end up in the
// logs and in the task's last error.
func toAddress(name, addr string) (*mail.Address, error) {
	a, err := mail.ParseAddress("<" + addr + ">")
	if err != nil {
		return nil, errBadRecipient
	}
	if !writableName(name) {
		return nil, errBadRecipientName
	}
	a.Name = name
	return a, nil
}

// writableName reports whether a To header can show name as it is: valid
// UTF-8 without control characters (NUL, CR, LF and the like, which the
// signup and import never accept: address.CheckName). Anything else,
// quotes and backslashes included, is written escaped or encoded.
func writableName(name string) bool {
	if !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if unicode.Is(unicode.Cc, r) {
			return false
		}
	}
	return true
}

// listHeaders are the RFC 2369 / RFC 2919 / RFC 8058 headers of a mail
// that has an unsubscribe link. A transactional mail (autoSubmitted) is
// no list's even when it carries one: the unsubscribe confirmation's
// link is its content, and a one-click header on it would let a mail
// client's "unsubscribe" button act on a mail the reader asked for.
func listHeaders(msg *Message, listID string) map[string]string {
	if msg.UnsubscribeURL == "" || autoSubmitted[msg.Kind] {
		return nil
	}
	h := map[string]string{
		"List-Unsubscribe":      "<" + msg.UnsubscribeURL + ">",
		"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
	}
	if msg.ListID != "" {
		listID = msg.ListID
	}
	if listID != "" {
		h["List-Id"] = listID
	}
	return h
}

// connBroken reports whether the connection may be in an unknown protocol
// state: then it is closed instead of reused.
func connBroken(err error) bool {
	var re *replyError
	return !errors.As(err, &re) || re.broken
}

// get returns an idle connection, or dials one when the pool has room, or
// waits for one to come back.
func (s *SMTP) get(ctx context.Context) (pc *pooledConn, reused bool, err error) {
	for {
		select {
		case pc := <-s.idle:
			if s.now().Sub(pc.lastUsed) > s.idleFor {
				s.discard(pc)
				continue
			}
			return pc, true, nil
		default:
		}
		select {
		case pc := <-s.idle:
			return pc, true, nil
		case s.slots <- struct{}{}:
			pc, err := s.dialInSlot(ctx)
			return pc, false, err
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// dial replaces a discarded connection: its slot was already released, so
// take one again.
func (s *SMTP) dial(ctx context.Context) (*pooledConn, error) {
	select {
	case s.slots <- struct{}{}:
		return s.dialInSlot(ctx)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *SMTP) dialInSlot(ctx context.Context) (*pooledConn, error) {
	c, err := s.client.DialToSMTPClientWithContext(ctx)
	if err != nil {
		<-s.slots
		return nil, err
	}
	return s.newPooledConn(c), nil
}

func (s *SMTP) put(pc *pooledConn) {
	pc.lastUsed = s.now()
	s.idle <- pc // never blocks: at most PoolSize connections exist
}

func (s *SMTP) discard(pc *pooledConn) {
	_ = pc.c.Close()
	<-s.slots
}

func (s *SMTP) reapIdle() {
	defer s.wg.Done()
	t := time.NewTicker(s.idleFor / 2)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		for n := len(s.idle); n > 0; n-- {
			select {
			case pc := <-s.idle:
				if s.now().Sub(pc.lastUsed) > s.idleFor {
					s.quit(pc)
				} else {
					s.idle <- pc
				}
			default:
			}
		}
	}
}

func (s *SMTP) quit(pc *pooledConn) {
	_ = s.client.CloseWithSMTPClient(pc.c)
	<-s.slots
}

// Close says QUIT on idle connections and stops the reaper. Sends still in
// flight finish on their own connection.
func (s *SMTP) Close() error {
	close(s.stop)
	s.wg.Wait()
	for {
		select {
		case pc := <-s.idle:
			s.quit(pc)
		default:
			return nil
		}
	}
}
