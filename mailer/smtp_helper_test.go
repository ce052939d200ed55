package mailer

import (
	"context"
	"time"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/internal/address"
)

// The composition tests send what the Composer makes through
// channels/email's SMTP transport, as the worker's mailer does
// (worker/email.go, which these tests cannot import: the worker imports
// mailer). SMTP here is that pair, with the options of both.

type Server = email.Server

var ParseServerURL = email.ParseServerURL

type SMTPOptions struct {
	Server                      email.Server
	From, ListID, BounceAddress string
	Helo                        string
	PoolSize                    int
	IdleTimeout, Timeout        time.Duration
	DKIM                        *email.DKIM
}

type SMTP struct {
	*Composer
	t *email.SMTP
}

func NewSMTP(o SMTPOptions) (*SMTP, error) {
	co := ComposeOptions{From: o.From, ListID: o.ListID, BounceAddress: o.BounceAddress}
	if o.DKIM != nil {
		co.DKIM = o.DKIM
	}
	c, err := NewComposer(co)
	if err != nil {
		return nil, err
	}
	t, err := email.NewSMTP(email.SMTPOptions{Server: o.Server, PoolSize: o.PoolSize, IdleTimeout: o.IdleTimeout, Timeout: o.Timeout, Helo: o.Helo})
	if err != nil {
		return nil, err
	}
	return &SMTP{Composer: c, t: t}, nil
}

func (s *SMTP) Send(ctx context.Context, msg *Message) error { return s.sendOn(ctx, s.t, msg) }

type rawSender interface {
	SendRaw(ctx context.Context, from, to string, data []byte) error
}

func (s *SMTP) sendOn(ctx context.Context, t rawSender, msg *Message) error {
	from, data, err := s.AppendMessage(nil, msg)
	if err != nil {
		return &email.SendError{Class: email.Invalid, Domain: address.Domain(msg.To), Err: err}
	}
	return t.SendRaw(ctx, from, msg.To, data)
}

func (s *SMTP) Open(ctx context.Context) (Session, error) {
	x, err := s.t.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &testSession{s: s, x: x}, nil
}

func (s *SMTP) Close() error     { return s.t.Close() }
func (s *SMTP) EncodesPrepared() {}

type testSession struct {
	s *SMTP
	x *email.Session
}

func (x *testSession) Send(ctx context.Context, msg *Message) error { return x.s.sendOn(ctx, x.x, msg) }
func (x *testSession) Close() error                                 { return x.x.Close() }
func (x *testSession) EncodesPrepared()                             {}
