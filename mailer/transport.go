package mailer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/address"
)

// RawSender carries a finished message (its bytes as they go out: header
// with the DKIM signatures, empty line, body) from an envelope sender to
// one recipient: an ESP's HTTP API under a Composed mailer. Errors are
// *SendError.
type RawSender interface {
	SendRaw(ctx context.Context, from, to string, data []byte) error
}

// HeaderRewriter is a RawSender that replaces some header fields of the
// messages it carries (SES sets its own Date and Message-ID): the DKIM
// signatures leave those out, or they would not verify at the receiver.
type HeaderRewriter interface {
	RewritesHeaders() []string
}

// PausedError means the transport refuses every message for now (SES's
// sending pause): neither the message's fault nor the address's. The
// worker stops sending until In has passed, and does not count the
// postponed tasks as failed (RetryAfter).
type PausedError struct {
	Reason string
	In     time.Duration
}

func (e *PausedError) Error() string {
	return fmt.Sprintf("transport paused for %s: %s", e.In, e.Reason)
}

// RetryAfter is when to try again.
func (e *PausedError) RetryAfter() time.Duration { return e.In }

// AsPaused returns the *PausedError in err's chain, or nil.
func AsPaused(err error) *PausedError {
	var pe *PausedError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// ComposeOptions are what composing a message takes: the part of
// SMTPOptions that is not about the connection.
type ComposeOptions struct {
	From   string // "Name <addr>"
	ListID string
	// DKIM signs every message when set. A transport that replaces some
	// headers (HeaderRewriter) needs a signer that leaves them out:
	// channels/email's DKIM.WithoutHeaders(send.RewritesHeaders()...).
	DKIM          Signer
	BounceAddress string // see SMTPOptions.BounceAddress
}

// Composed is a Mailer that composes each message exactly as the SMTP
// mailer does (From, To, Message-ID with the VERP tag, the List and
// Feedback-ID headers, DKIM) and hands its bytes, with the envelope
// sender (the VERP return path), to a RawSender.
type Composed struct {
	// smtp composes; it never dials (its pool is closed at once).
	smtp *SMTP
	send RawSender
}

// NewComposed returns a Mailer that sends through send.
func NewComposed(o ComposeOptions, send RawSender) (*Composed, error) {
	hr, rewrites := send.(HeaderRewriter)
	s, err := NewSMTP(SMTPOptions{
		// Never dialled: the SMTP mailer is here for its composition.
		Server: Server{Host: "composer.invalid", Port: 25, TLS: "none"},
		From:   o.From, ListID: o.ListID, DKIM: o.DKIM, BounceAddress: o.BounceAddress,
	})
	if err != nil {
		return nil, err
	}
	if err := s.Close(); err != nil { // stops its idle reaper; it has no connection
		return nil, err
	}
	s.noFeedbackID = rewrites && slices.ContainsFunc(hr.RewritesHeaders(), func(h string) bool { return strings.EqualFold(h, "Feedback-ID") })
	return &Composed{smtp: s, send: send}, nil
}

// Send implements Mailer.
func (c *Composed) Send(ctx context.Context, msg *Message) error {
	from, data, err := c.compose(msg)
	if err != nil {
		return &SendError{Class: Invalid, Domain: address.Domain(msg.To), Err: err}
	}
	return c.send.SendRaw(ctx, from, msg.To, data)
}

// compose returns msg's envelope sender and its bytes as the SMTP mailer
// would send them (SMTP.message: encoded from a prepared template or
// written by go-mail, and signed).
func (c *Composed) compose(msg *Message) (from string, data []byte, err error) {
	env, data, err := c.smtp.message(msg, nil)
	return env.from, data, err
}

// encodesPrepared: a Composed mailer writes a prepared mail from its
// encoded template, as SMTP does (Prepared.RenderFor).
func (c *Composed) encodesPrepared() {}
