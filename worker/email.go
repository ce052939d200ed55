package worker

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/mailer"
)

// Where the mailer meets the e-mail channel. mailer composes a Message
// into bytes (it may import only leaves) and channels/email carries them
// (it may import only the seam and leaves); the worker, which imports
// both, joins them here into the mailer.Mailer its lanes send through.

// MailTransport carries a composed mail: channels/email's SMTP and SES.
// Errors are *email.SendError.
type MailTransport interface {
	SendRaw(ctx context.Context, from, to string, data []byte) error
}

// Email is a mailer.Mailer that composes each message with a
// mailer.Composer and hands its bytes, with the envelope sender, to a
// MailTransport.
type Email struct {
	compose *mailer.Composer
	send    MailTransport
	// bufs hold messages' bytes between composing and sending, reused as
	// the SMTP pool reused a connection's buffer.
	bufs sync.Pool
}

// headerRewriter is a transport that replaces some header fields of the
// messages it carries (SES sets its own Date and Message-ID).
type headerRewriter interface{ RewritesHeaders() []string }

// NewEmail returns the mailer over send. dkim, when not nil, signs every
// mail; a transport that rewrites headers after signing gets signatures
// that leave those out, or they would not verify at the receiver.
func NewEmail(o mailer.ComposeOptions, dkim *email.DKIM, send MailTransport) (*Email, error) {
	if hr, ok := send.(headerRewriter); ok {
		o.Rewritten = hr.RewritesHeaders()
		if dkim != nil {
			dkim = dkim.WithoutHeaders(o.Rewritten...)
		}
	}
	if dkim != nil {
		// Set only when there is one: a nil *email.DKIM in the interface
		// would not be nil.
		o.DKIM = dkim
	}
	c, err := mailer.NewComposer(o)
	if err != nil {
		return nil, err
	}
	return &Email{compose: c, send: send}, nil
}

// Send implements mailer.Mailer.
func (m *Email) Send(ctx context.Context, msg *mailer.Message) error {
	return m.sendOn(ctx, m.send, msg)
}

// sendOn composes msg and sends it through t; a message that cannot be
// composed is Invalid, as retrying cannot help. It is composed before the
// transport takes a connection, so such a message never waits for one
// (the SMTP mailer in mailer took the connection first).
func (m *Email) sendOn(ctx context.Context, t MailTransport, msg *mailer.Message) error {
	buf, _ := m.bufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	defer m.bufs.Put(buf)
	from, data, err := m.compose.AppendMessage((*buf)[:0], msg)
	if err != nil {
		return &email.SendError{Class: email.Invalid, Domain: address.Domain(msg.To), Err: err}
	}
	*buf = data[:0]
	return t.SendRaw(ctx, from, msg.To, data)
}

// EncodesPrepared: the composer writes a prepared mail from its encoded
// template (mailer.Prepared.RenderFor).
func (m *Email) EncodesPrepared() {}

// Close closes the transport when it holds connections (the SMTP pool).
func (m *Email) Close() error {
	if c, ok := m.send.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// SMTPEmail is the mailer over the SMTP pool, which can also hold one
// connection for a batch (mailer.Opener).
type SMTPEmail struct {
	*Email
	smtp *email.SMTP
}

// NewSMTPEmail returns the mailer over the SMTP pool s.
func NewSMTPEmail(o mailer.ComposeOptions, dkim *email.DKIM, s *email.SMTP) (*SMTPEmail, error) {
	m, err := NewEmail(o, dkim, s)
	if err != nil {
		return nil, err
	}
	return &SMTPEmail{Email: m, smtp: s}, nil
}

// Compose is msg as Send would put it on the wire, without sending it:
// an issue's preview as .eml is the bytes the SMTP mailer sends.
func (m *SMTPEmail) Compose(msg *mailer.Message) ([]byte, error) { return m.compose.Compose(msg) }

// Open implements mailer.Opener: one pooled connection for a batch.
func (m *SMTPEmail) Open(ctx context.Context) (mailer.Session, error) {
	x, err := m.smtp.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &emailSession{m: m.Email, x: x}, nil
}

// emailSession composes as its Email does and sends on one connection.
type emailSession struct {
	m *Email
	x *email.Session
}

func (s *emailSession) Send(ctx context.Context, msg *mailer.Message) error {
	return s.m.sendOn(ctx, s.x, msg)
}

func (s *emailSession) Close() error { return s.x.Close() }

// EncodesPrepared: as Email's.
func (s *emailSession) EncodesPrepared() {}

// NewSMTPMailer is NewSMTPEmail over a new pool for o, without DKIM: the
// tests' mailer, and anything else that needs no signature.
func NewSMTPMailer(c mailer.ComposeOptions, o email.SMTPOptions) (*SMTPEmail, error) {
	pool, err := email.NewSMTP(o)
	if err != nil {
		return nil, err
	}
	m, err := NewSMTPEmail(c, nil, pool)
	if err != nil {
		return nil, errors.Join(err, pool.Close())
	}
	return m, nil
}
