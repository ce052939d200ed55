package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Purpose is what a token may be used for.
type Purpose string

// The purposes a token can carry.
const (
	Confirm     Purpose = "confirm"
	Unsubscribe Purpose = "unsubscribe"
	// Preferences opens the preference centre: see and change topics,
	// name and time zone, or leave. It cannot confirm, and a confirm or
	// unsubscribe token cannot open it.
	Preferences Purpose = "preferences"
)

// DefaultConfirmTTL is how long a confirmation link works.
const DefaultConfirmTTL = 7 * 24 * time.Hour

// Errors returned by Verify. Both mean "show the bad-link page".
var (
	ErrInvalid = errors.New("token is not valid")
	ErrExpired = errors.New("token has expired")
)

// Signer issues and checks tokens with one HMAC-SHA256 key.
type Signer struct {
	key        []byte
	confirmTTL time.Duration
	now        func() time.Time
}

// NewSigner returns a Signer for key. confirmTTL <= 0 means DefaultConfirmTTL.
func NewSigner(key []byte, confirmTTL time.Duration) *Signer {
	if confirmTTL <= 0 {
		confirmTTL = DefaultConfirmTTL
	}
	return &Signer{key: key, confirmTTL: confirmTTL, now: time.Now}
}

// WithClock returns a copy of s that reads time from now (for tests).
func (s *Signer) WithClock(now func() time.Time) *Signer {
	c := *s
	c.now = now
	return &c
}

// Sign returns a URL-safe token for email and purpose. Confirm tokens carry an
// expiry; the others do not, because an old digest's unsubscribe link
// must keep working (RFC 8058 and the mailbox providers expect it).
func (s *Signer) Sign(p Purpose, email string) string {
	return s.SignTopic(p, email, "")
}

// SignTopic is Sign for a token that also names a topic: an unsubscribe
// link that leaves only the topic of the mail it came in.
func (s *Signer) SignTopic(p Purpose, email, topic string) string {
	exp := int64(0)
	if p == Confirm {
		exp = s.now().Add(s.confirmTTL).Unix()
	}
	body := string(p) + "\n" + email + "\n" + strconv.FormatInt(exp, 10)
	if topic != "" {
		body += "\n" + topic
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(body)) + "." + enc.EncodeToString(s.mac(body))
}

// Verify checks tok for purpose p and returns the e-mail address it names.
func (s *Signer) Verify(p Purpose, tok string) (string, error) {
	email, _, err := s.VerifyTopic(p, tok)
	return email, err
}

// VerifyTopic is Verify that also returns the topic the token names (""
// for a token without one, such as those in mails from before topics:
// they stand for every topic).
func (s *Signer) VerifyTopic(p Purpose, tok string) (email, topic string, err error) {
	enc := base64.RawURLEncoding
	b64body, b64mac, ok := strings.Cut(tok, ".")
	if !ok {
		return "", "", ErrInvalid
	}
	body, err := enc.DecodeString(b64body)
	if err != nil {
		return "", "", ErrInvalid
	}
	mac, err := enc.DecodeString(b64mac)
	if err != nil || !hmac.Equal(mac, s.mac(string(body))) {
		return "", "", ErrInvalid
	}
	parts := strings.Split(string(body), "\n")
	if len(parts) < 3 || len(parts) > 4 || Purpose(parts[0]) != p {
		return "", "", ErrInvalid
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return "", "", ErrInvalid
	}
	if exp != 0 && s.now().Unix() > exp {
		return "", "", fmt.Errorf("%w (at %s)", ErrExpired, time.Unix(exp, 0).UTC().Format(time.RFC3339))
	}
	if len(parts) == 4 {
		topic = parts[3]
	}
	return parts[1], topic, nil
}

func (s *Signer) mac(body string) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(body))
	return h.Sum(nil)
}
