package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/newsletter/newsletter/internal/address"
)

// SMTPOptions configure the SMTP transport.
type SMTPOptions struct {
	Server Server
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
	// Helo is the name in EHLO (default: go-mail's, the machine's name).
	// Once mail leaves a relay, a bare machine name costs spam points.
	Helo string

	// dial replaces the dialler (tests count the writes on a connection).
	dial gomail.DialContextFunc
}

// SMTP carries composed mail through a pool of reused SMTP connections: a
// connection carries many messages (with RSET only after a refused
// recipient), is replaced when it breaks, and is closed when idle. What
// it sends is a finished message (mailer composes and signs it); it
// batches as SMTP allows, one pooled connection for a whole run of
// messages (Open), each transaction pipelined (transaction.go).
type SMTP struct {
	client  *gomail.Client // configuration only; connections are pooled
	idleFor time.Duration
	timeout time.Duration
	// Tests turn the server's extensions off to take the other paths.
	noPipelining, noChunking bool

	slots chan struct{} // one per open connection
	idle  chan *pooledConn
	stop  chan struct{}
	wg    sync.WaitGroup
	now   func() time.Time
}

// NewSMTP returns a pooled SMTP transport. It dials lazily, so a mail
// server that is down at start-up delays mail instead of stopping the
// service.
func NewSMTP(o SMTPOptions) (*SMTP, error) {
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
		client:  client,
		idleFor: o.IdleTimeout,
		timeout: o.Timeout,
		slots:   make(chan struct{}, o.PoolSize),
		idle:    make(chan *pooledConn, o.PoolSize),
		stop:    make(chan struct{}),
		now:     time.Now,
	}
	s.wg.Add(1)
	go s.reapIdle()
	return s, nil
}

// SendRaw sends data (a whole message, header and body) from the
// envelope sender from to the one recipient to, on a pooled connection.
// Errors are *SendError.
func (s *SMTP) SendRaw(ctx context.Context, from, to string, data []byte) error {
	env := envelope{from: from, to: to}
	if err := env.valid(); err != nil {
		return &SendError{Class: Invalid, Domain: address.Domain(to), Err: err}
	}
	pc, reused, err := s.get(ctx)
	if err != nil {
		return &SendError{Class: Temporary, Domain: address.Domain(to), Err: fmt.Errorf("connect: %w", err)}
	}
	pc, _, err = s.sendOn(ctx, pc, reused, env, data)
	if pc != nil {
		s.put(pc)
	}
	return err
}

// Session holds one pooled connection for a run of messages, such as a
// digest batch; Close returns it to the pool.
type Session struct {
	smtp   *SMTP
	pc     *pooledConn // nil after the connection broke
	reused bool
}

// Open returns a Session on a pooled connection.
func (s *SMTP) Open(ctx context.Context) (*Session, error) {
	pc, reused, err := s.get(ctx)
	if err != nil {
		return nil, &SendError{Class: Temporary, Err: fmt.Errorf("connect: %w", err)}
	}
	return &Session{smtp: s, pc: pc, reused: reused}, nil
}

// SendRaw is SMTP.SendRaw on the session's connection (a fresh one
// after it broke).
func (x *Session) SendRaw(ctx context.Context, from, to string, data []byte) error {
	env := envelope{from: from, to: to}
	if err := env.valid(); err != nil {
		return &SendError{Class: Invalid, Domain: address.Domain(to), Err: err}
	}
	if x.pc == nil {
		pc, err := x.smtp.dial(ctx)
		if err != nil {
			return &SendError{Class: Temporary, Domain: address.Domain(to), Err: fmt.Errorf("reconnect: %w", err)}
		}
		x.pc, x.reused = pc, false
	}
	var err error
	x.pc, _, err = x.smtp.sendOn(ctx, x.pc, x.reused, env, data)
	x.reused = true
	return err
}

// Close returns the session's connection to the pool.
func (x *Session) Close() error {
	if x.pc != nil {
		x.smtp.put(x.pc)
		x.pc = nil
	}
	return nil
}

// sendOn sends data over pc and returns the connection to keep using, or
// nil when it was closed because its protocol state is unknown, and the
// server's name for the accepted mail (queueID).
func (s *SMTP) sendOn(ctx context.Context, pc *pooledConn, reused bool, env envelope, data []byte) (*pooledConn, string, error) {
	domain := address.Domain(env.to)
	reply, err := s.transact(pc, env, data)
	if err != nil && reused && noReply(err) {
		// The server closed an idle connection: one more try on a fresh
		// one (see noReply).
		s.discard(pc)
		if pc, err = s.dial(ctx); err != nil {
			return nil, "", &SendError{Class: Temporary, Domain: domain, Err: fmt.Errorf("reconnect: %w", err)}
		}
		reply, err = s.transact(pc, env, data)
	}
	if err == nil {
		pc.lastUsed = s.now()
		return pc, queueID(reply), nil
	}
	se := classify(err, domain)
	if connBroken(err) {
		s.discard(pc)
		return nil, "", se
	}
	return pc, "", se
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
