package mailer

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	gomail "github.com/wneessen/go-mail"

	"github.com/newsletter/newsletter/internal/address"
)

// ComposeOptions configure a Composer.
type ComposeOptions struct {
	From string // "Name <addr>"
	// ListID names the list in a List-Id header on every mail with an
	// unsubscribe link ("Newsletter <news.example.com>").
	ListID string
	// DKIM signs every message when set (channels/email's DKIM).
	DKIM Signer
	// BounceAddress is the envelope sender, with each message's Tag after
	// a '+' (VERP), so a late bounce names its mail; empty: From.
	BounceAddress string
	// Rewritten are the headers the transport replaces after composing
	// (SES: channels/email's SES.RewritesHeaders). The composer writes no
	// Feedback-ID when it is among them: a second one of ours, unsigned
	// there, would only confuse a mailbox provider's feedback loop. (The
	// signer must leave them out too: DKIM.WithoutHeaders.)
	Rewritten []string
	// Log takes what an operator should hear of (default slog.Default()).
	Log *slog.Logger
}

// Composer turns a Message into the bytes that go on the wire, with its
// envelope sender: From, To, Message-ID with the VERP tag, Date, the List
// and Feedback-ID headers, the MIME parts, and the DKIM signatures. A
// transport (channels/email: SMTP or SES) carries what it makes.
type Composer struct {
	from string
	// envelopeFrom is the From address, the envelope sender without a
	// BounceAddress.
	envelopeFrom string
	domain       string
	listID       string
	dkim         Signer
	bounce       string
	log          *slog.Logger
	// date is the last Date value made (encode.go).
	date atomic.Pointer[dateField]
	// noFeedbackID: the transport writes its own Feedback-ID (SES).
	noFeedbackID bool
	now          func() time.Time
}

// NewComposer returns a Composer.
func NewComposer(o ComposeOptions) (*Composer, error) {
	from, err := mail.ParseAddress(o.From)
	if err != nil {
		return nil, fmt.Errorf("smtp: from %q: %w", o.From, err)
	}
	return &Composer{
		from:         from.String(),
		envelopeFrom: from.Address,
		domain:       address.Domain(from.Address),
		listID:       o.ListID,
		dkim:         o.DKIM,
		bounce:       o.BounceAddress,
		log:          cmp.Or(o.Log, slog.Default()),
		noFeedbackID: slices.ContainsFunc(o.Rewritten, func(h string) bool { return strings.EqualFold(h, "Feedback-ID") }),
		now:          time.Now,
	}, nil
}

// Compose is msg as a transport would put it on the wire (every header,
// the DKIM signature), without sending it: an issue's preview as .eml.
func (s *Composer) Compose(msg *Message) ([]byte, error) {
	_, data, err := s.AppendMessage(nil, msg)
	return data, err
}

// Why a message could not be built for its recipient. Neither quotes
// what it refuses: the logs carry no name or address.
var (
	errBadRecipient     = errors.New("the recipient's address cannot be written in a To header")
	errBadRecipientName = errors.New("the recipient's name cannot be written in a To header")
)

// AppendMessage appends msg's bytes as they go to the server to buf, and
// returns them with the envelope sender: encoded from its prepared
// template (encode.go) or written by go-mail, and signed when DKIM is on.
// It fills in msg's Message-ID and Date when they are empty.
func (s *Composer) AppendMessage(buf []byte, msg *Message) (from string, data []byte, err error) {
	env, data, err := s.message(msg, buf)
	return env.from, data, err
}

// envelope is who a message goes from and to.
type envelope struct{ from, to string }

// valid refuses an address that would break the command line (the
// transport checks again before it writes one).
func (env envelope) valid() error {
	for _, a := range []string{env.from, env.to} {
		if a == "" || strings.ContainsAny(a, "\r\n<>") {
			return fmt.Errorf("envelope address %q", a)
		}
	}
	return nil
}

func (s *Composer) message(msg *Message, buf []byte) (envelope, []byte, error) {
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
func (s *Composer) writeGoMail(msg *Message, buf []byte) ([]byte, error) {
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
func (s *Composer) build(msg *Message) (*gomail.Msg, error) {
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
