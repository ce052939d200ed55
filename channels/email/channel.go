package email

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/internal/address"
)

// Name is the e-mail channel's name: its lane, its metrics' channel label
// and its delivery marks' kind.
const Name = "email"

// AttrFrom is the Attrs key of a Message's envelope sender: the VERP
// return path (mailer's bounces+<tag>@…) that SMTP gives in MAIL FROM
// and SES takes as FeedbackForwardingEmailAddress. A message without one
// is Invalid (dropped): a mail with an empty return path would be a
// bounce itself.
const AttrFrom = "from"

// MaxBatch is how many mails one SMTP Send takes over its one session:
// the worker's issue and digest batch (worker.DefaultDigestBatch), which
// has gone over one session since the pool was written. A relay that
// limits mails per connection (Exchange's MaxMessagesPerConnection, 20 by
// default) answers the rest 421 or closes: they are retried (Classify).
const MaxBatch = 100

// SESMaxBody is the largest mail the SES v2 API takes: 40 MB "after base64
// encoding" (SES quotas), so 30 MB of raw message. The SMTP channel
// declares none: the relay's SIZE is its own, and a mail over it is
// answered 552 5.3.4 and dropped.
const SESMaxBody = 30_000_000

// AuthPause is how long a refusal of our account holds the lane: a
// relay's refusal of our login (535, 530), SES's AccessDenied
// (authRefused). Every mail would meet the same answer until an operator
// fixes the credentials, so the mails wait, uncounted as failures,
// instead of each using up its retries or being dropped.
const AuthPause = 5 * time.Minute

// ErrTooLarge drops a mail over the channel's MaxBody before it is sent.
var ErrTooLarge = errors.New("mail over the provider's size limit")

// ErrNotSent answers the mails of a batch that were not tried because the
// session's connection broke on an earlier one: the lane retries them.
var ErrNotSent = errors.New("not sent: the session's connection broke on an earlier mail")

// Transport is what a Channel sends through: *SMTP or *SES.
type Transport interface {
	// spec is the transport's MaxBatch and MaxBody.
	spec() channels.Spec
	// sendBatch sends a batch whose mails all have a sender, fit
	// MaxBody and number at most MaxBatch.
	sendBatch(ctx context.Context, batch []channels.Message, out []channels.Outcome)
}

// Channel is the e-mail channel as the worker holds it: one composed mail
// per Message (To: the envelope recipient; Body: the mail's bytes as
// mailer composed and DKIM-signed them, CRLF line ends; Attrs: AttrFrom,
// the envelope sender). Over SMTP a batch of up to MaxBatch goes over one
// pooled connection (doc.go); over SES it is one SendEmail per mail
// (MaxBatch 1, MaxBody SESMaxBody).
type Channel struct {
	Transport Transport
}

var _ channels.Channel = Channel{}

// Spec declares the channel; its batch and body limits are its
// transport's.
func (c Channel) Spec() channels.Spec {
	s := c.Transport.spec()
	s.Name = Name
	return s
}

// Send sends the batch and answers one Outcome per mail, in order
// (Classify). A mail without a sender or over MaxBody is dropped without
// a word to the server; a canceled ctx answers Retry for what was not
// sent. A batch over MaxBatch goes in runs of MaxBatch.
func (c Channel) Send(ctx context.Context, batch []channels.Message) []channels.Outcome {
	spec := c.Spec()
	out := make([]channels.Outcome, len(batch))
	// Refuse what cannot be sent before taking a connection; send the
	// rest in runs of MaxBatch, keeping each mail's place in out.
	var run []channels.Message
	var at []int
	flush := func() {
		if len(run) == 0 {
			return
		}
		res := make([]channels.Outcome, len(run))
		c.Transport.sendBatch(ctx, run, res)
		for k, i := range at {
			out[i] = res[k]
		}
		run, at = run[:0], at[:0]
	}
	for i, m := range batch {
		if err := checkMessage(m, spec.MaxBody); err != nil {
			out[i] = Classify("", err)
			continue
		}
		run, at = append(run, m), append(at, i)
		if len(run) == max(spec.MaxBatch, 1) {
			flush()
		}
	}
	flush()
	return out
}

// checkMessage refuses a mail that no server would take: no envelope
// sender, an address that would break the command line, over maxBody.
func checkMessage(m channels.Message, maxBody int) error {
	env := envelope{from: m.Attrs[AttrFrom], to: m.To}
	if err := env.valid(); err != nil {
		return &SendError{Class: Invalid, Domain: address.Domain(m.To), Err: err}
	}
	if maxBody > 0 && len(m.Body) > maxBody {
		return &SendError{Class: Invalid, Domain: address.Domain(m.To),
			Err: fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(m.Body), maxBody)}
	}
	return nil
}

// Classify is the Outcome of the transport's answer to one mail: accepted
// is Sent, with the server's id for it (the SMTP queue id, SES's
// MessageId) when there is one. A failure is read from its SendError
// class (errors.go, one table for both transports and for the worker):
//
//   - Bounced (550 5.1.1 user unknown, 5.1.x, 5.2.1, a bare 550 at RCPT)
//     retires the address.
//   - A refused login or mail without one (535, 530, 534), SES's
//     AccessDenied or unverified MAIL FROM domain (authRefused) pause the
//     lane for AuthPause: the provider refuses every mail alike.
//   - A sending pause (SES's PausedError) pauses the lane for its In.
//   - Rejected (552 5.3.4 too big, 554 5.7.1 content or policy, another
//     5xx for the message) and Invalid (no sender, a bad address, too
//     large, a mail that could not be composed) drop the mail and keep
//     the address.
//   - Temporary and Throttled (any 4xx, 421 and 552 at RCPT included; a
//     refused or dropped connection, a timeout, a TLS failure, a canceled
//     ctx) retry, no sooner than the SendError's RetryAfter (0: the
//     lane's backoff). SMTP has no Retry-After, so it is 0 but for SES.
//
// 421 ("service not available, closing channel") retries rather than
// pauses: a relay answers it for one connection too many or one restart
// as much as for an outage, and the lane's backoff handles all three
// without holding the other connections' mail. Outcome.Err keeps the
// *SendError, so its Class (Throttled: slow the domain) and codes stay
// readable to the worker.
func Classify(id string, err error) channels.Outcome {
	if err == nil {
		return channels.Outcome{Verdict: channels.Sent, ProviderID: id}
	}
	if pe := AsPaused(err); pe != nil {
		return channels.Outcome{Verdict: channels.Pause, After: pe.In, Err: err}
	}
	if authRefused(err) {
		return channels.Outcome{Verdict: channels.Pause, After: AuthPause, Err: err}
	}
	se := AsSendError(err)
	if se == nil {
		return channels.Outcome{Verdict: channels.Retry, Err: err}
	}
	switch se.Class {
	case Bounced:
		return channels.Outcome{Verdict: channels.Retire, Err: err}
	case Rejected, Invalid:
		return channels.Outcome{Verdict: channels.Drop, Err: err}
	}
	return channels.Outcome{Verdict: channels.Retry, After: max(se.RetryAfter, 0), Err: err}
}

// spec: the SMTP channel batches over one session, and leaves the size
// limit to the relay.
func (s *SMTP) spec() channels.Spec { return channels.Spec{MaxBatch: MaxBatch} }

// sendBatch sends the batch over one pooled connection, one transaction
// per mail (pipelined where the server offers PIPELINING, transact), with
// RSET after a refusal so that the next mail goes on. A connection that
// breaks answers its mail as the failure it was (Retry) and every mail
// after it Retry (ErrNotSent), untried: the lane sends them again, on a
// connection of the next Send. A canceled ctx answers Retry for the mails
// not begun.
func (s *SMTP) sendBatch(ctx context.Context, batch []channels.Message, out []channels.Outcome) {
	pc, reused, err := s.get(ctx)
	if err != nil {
		for i, m := range batch {
			out[i] = Classify("", &SendError{Class: Temporary, Domain: address.Domain(m.To), Err: fmt.Errorf("connect: %w", err)})
		}
		return
	}
	var broke error
	for i, m := range batch {
		domain := address.Domain(m.To)
		switch {
		case broke != nil:
			out[i] = Classify("", &SendError{Class: Temporary, Domain: domain, Err: fmt.Errorf("%w: %v", ErrNotSent, broke)})
			continue
		case ctx.Err() != nil:
			out[i] = Classify("", &SendError{Class: Temporary, Domain: domain, Err: ctx.Err()})
			continue
		}
		var id string
		pc, id, err = s.sendOn(ctx, pc, reused, envelope{from: m.Attrs[AttrFrom], to: m.To}, m.Body)
		reused = true
		out[i] = Classify(id, err)
		if pc == nil {
			broke = err
		}
	}
	if pc != nil {
		s.put(pc)
	}
}

// spec: SES takes one raw mail per SendEmail (its Destination is the
// envelope of that one mail, and SES v2 has no call for many raw mails),
// so the SES channel sends one by one.
func (s *SES) spec() channels.Spec { return channels.Spec{MaxBatch: 1, MaxBody: SESMaxBody} }

func (s *SES) sendBatch(ctx context.Context, batch []channels.Message, out []channels.Outcome) {
	copy(out, channels.OneByOne(ctx, batch, func(ctx context.Context, m channels.Message) channels.Outcome {
		return Classify(s.send(ctx, m.Attrs[AttrFrom], m.To, m.Body))
	}))
}

// queueID is the server's name for an accepted mail in the text of its
// last reply, when it gives one in a known form: Postfix's "2.0.0 Ok:
// queued as 4Q1b2c3d4e", Exim's "OK id=1rAbCd-000Efg-Hi", and Amazon SES
// SMTP's "Ok 0100018c…-000000" (the MessageId its notifications carry).
// Any other text ("2.0.0 OK: queued", Gmail's timestamps) names nothing.
func queueID(reply string) string {
	f := strings.Fields(reply)
	if len(f) > 0 && enhancedFromText(f[0]) == f[0] {
		f = f[1:] // the enhanced status code
	}
	for i, w := range f {
		switch lw := strings.ToLower(w); {
		case lw == "as" && i > 0 && strings.EqualFold(f[i-1], "queued") && i+1 < len(f):
			return strings.TrimRight(f[i+1], ".,;)")
		case strings.HasPrefix(lw, "id=") && len(w) > 3:
			return strings.TrimRight(w[3:], ".,;)")
		}
	}
	if len(f) == 2 && strings.EqualFold(f[0], "ok") {
		return f[1]
	}
	return ""
}
