package mailer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
)

// Kinds lists every kind of mail.
func Kinds() []string {
	return []string{KindConfirm, KindWelcome, KindDigest, KindEvents, KindUnsubscribe}
}

// Message is one rendered mail to one recipient.
type Message struct {
	Kind    string
	To      string
	Subject string
	Text    string
	HTML    string
	// UnsubscribeURL, when set, is shown in the body by the templates and
	// sent as List-Unsubscribe with RFC 8058 one-click.
	UnsubscribeURL string
	// MessageID is filled by Send when empty, without angle brackets.
	MessageID string
	Date      time.Time
}

// Mailer delivers messages. Errors are *SendError.
type Mailer interface {
	Send(ctx context.Context, msg *Message) error
}

// newMessageID returns a globally unique id at domain.
func newMessageID(domain string) string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "@" + domain
}
