package mailer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"
)

// Kinds of mail. Confirm is transactional: no unsubscribe link.
const (
	KindConfirm = "confirm"
	KindWelcome = "welcome"
	KindDigest  = "digest"
	KindEvents  = "events"
	// KindUnsubscribe carries a one-click unsubscribe link to an address
	// that asked to leave by typing it.
	KindUnsubscribe = "unsubscribe"
	// KindPreferences carries a fresh preferences link to the address
	// an expired one named, asked for on that link's page.
	KindPreferences = "preferences"
	// KindIssue is an issue a publisher wrote (Markdown).
	KindIssue = "issue"
	// KindInvite invites a colleague to the console: transactional, to
	// one person, never a list's (not among Kinds: it has no template).
	KindInvite = "invite"
)

// Kinds lists every kind of mail.
func Kinds() []string {
	return []string{KindConfirm, KindWelcome, KindDigest, KindEvents, KindUnsubscribe, KindPreferences, KindIssue}
}

// Message is one rendered mail to one recipient.
type Message struct {
	Kind   string
	To     string
	ToName string // the subscriber's name, when known: shown in To
	// Tag traces the mail to its subscriber in a late bounce or complaint
	// (the VERP tag): it goes into the envelope sender and the Message-ID.
	Tag     string
	Subject string
	Text    string
	HTML    string
	// UnsubscribeURL, when set, is shown in the body by the templates and
	// sent as List-Unsubscribe with RFC 8058 one-click.
	UnsubscribeURL string
	// ListID is the List-Id of the mail's topic; "" : the sender's
	// (ComposeOptions.ListID).
	ListID string
	// From is the mail's From ("Name <addr>", the settings'); "" : the
	// sender's (ComposeOptions.From). It must align with the DKIM domain
	// (settings.Check sees to it). ReplyTo, when set, is its Reply-To.
	From, ReplyTo string
	// MessageID is filled by Send when empty, without angle brackets.
	MessageID string
	Date      time.Time

	// prep, set by Prepared.Render, lets a sender encode the mail from
	// its variant's pieces (encode.go).
	prep *preparedMail
	// boundary, when set, is the multipart boundary (go-mail picks a
	// random one otherwise): a prepared mail's is its template's.
	boundary string
}

// Mailer delivers messages. Errors are channels/email's *SendError (the
// worker's mailer, worker/email.go, makes a message that cannot be
// composed Invalid).
type Mailer interface {
	Send(ctx context.Context, msg *Message) error
}

// Session holds one transport connection for a run of messages, such as
// a digest batch; Close gives it back.
type Session interface {
	Mailer
	Close() error
}

// Opener is a Mailer that can hand out a Session.
type Opener interface {
	Open(ctx context.Context) (Session, error)
}

// newMessageID returns a globally unique id at domain, carrying tag
// ("<random>.<tag>@domain") so that a complaint quoting only the mail's
// headers still names its subscriber.
func newMessageID(tag, domain string) string {
	var b [16]byte
	rand.Read(b[:])
	if tag != "" {
		return hex.EncodeToString(b[:]) + "." + tag + "@" + domain
	}
	return hex.EncodeToString(b[:]) + "@" + domain
}

// returnPath is the envelope sender for a mail with tag:
// bounces@b.example.com → bounces+<tag>@b.example.com (VERP).
func returnPath(bounce, tag string) string {
	at := strings.LastIndexByte(bounce, '@')
	if tag == "" || at < 0 {
		return bounce
	}
	return bounce[:at] + "+" + tag + bounce[at:]
}

// feedbackID is the Feedback-ID header of a stream, which mailbox
// providers' feedback loops aggregate complaints by (Gmail's format, the
// sender last): "<kind>:newsletter:<domain>".
func feedbackID(kind, domain string) string { return kind + ":newsletter:" + domain }
