package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/keyedmac"
)

// Purpose is what a token may be used for.
type Purpose string

// The purposes a token can carry.
const (
	Confirm     Purpose = "confirm"
	Unsubscribe Purpose = "unsubscribe"
	// Preferences opens the preference centre: see and change topics,
	// name and time zone, or leave. It cannot confirm, and a confirm or
	// unsubscribe token cannot open it. It works for PreferencesTTL.
	Preferences Purpose = "preferences"
	// Resubscribe undoes an unsubscribe just done: the page that says
	// "you are unsubscribed" carries it, naming the topics left
	// (comma-separated, in the topic field). It works for ResubscribeTTL.
	Resubscribe Purpose = "resubscribe"
)

// DefaultConfirmTTL is how long a confirmation link works.
const DefaultConfirmTTL = 7 * 24 * time.Hour

// PreferencesTTL is how long a preferences link works: a mail forwarded
// or left in an old mailbox stops opening someone's settings (and
// showing their address); the page of an expired one offers to mail a
// fresh link to the address it names. A preferences token without an
// expiry (from before this bound) counts as expired.
const PreferencesTTL = 90 * 24 * time.Hour

// ResubscribeTTL is how long the undo of an unsubscribe works.
const ResubscribeTTL = 7 * 24 * time.Hour

// Errors returned by Verify. Both mean "show the bad-link page".
var (
	ErrInvalid = errors.New("token is not valid")
	ErrExpired = errors.New("token has expired")
)

// Subject is whom a verified token names.
type Subject struct {
	// ID is the subscriber's id; 0 only in a legacy token.
	ID int64
	// Email is set only by a legacy token (from before ids): the address
	// it was issued for.
	Email string
	// Topic is the one topic an unsubscribe link leaves; "" for every
	// topic (and for tokens without one, such as those in mails from
	// before topics).
	Topic string
	// Issue is the issue whose mail carried the link (0: another mail,
	// or one from before issues were named): an unsubscribe through it
	// counts in that issue's report.
	Issue int64
}

// Legacy tells a token from before ids: it names an address.
func (s Subject) Legacy() bool { return s.ID == 0 }

// enc is the tokens' alphabet: URL-safe, unpadded, and strict, so that a
// changed unused bit in the last character does not decode to the same
// bytes (decode below also insists on the canonical spelling).
var enc = base64.RawURLEncoding.Strict()

// Signer issues and checks tokens.
type Signer struct {
	key       *keyedmac.Key // signs and checks the tokens issued now
	legacyKey *keyedmac.Key // checks the tokens from before ids (the secret itself)
	// fingerprint hashes what the service must recognise again but not
	// keep readable (Fingerprint).
	fingerprint *keyedmac.Key
	confirmTTL  time.Duration
	now         func() time.Time
}

// NewSigner returns a Signer for the service's secret. confirmTTL <= 0
// means DefaultConfirmTTL.
func NewSigner(secret []byte, confirmTTL time.Duration) *Signer {
	if confirmTTL <= 0 {
		confirmTTL = DefaultConfirmTTL
	}
	// A key of its own for the id tokens: no body signed under the old
	// scheme can ever verify as a new token, or the reverse.
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("newsletter token key v2"))
	f := hmac.New(sha256.New, secret)
	f.Write([]byte("newsletter fingerprint v1"))
	return &Signer{key: keyedmac.New(m.Sum(nil)), legacyKey: keyedmac.New(secret), fingerprint: keyedmac.New(f.Sum(nil)), confirmTTL: confirmTTL, now: time.Now}
}

// WithClock returns a copy of s that reads time from now (for tests).
func (s *Signer) WithClock(now func() time.Time) *Signer {
	c := *s
	c.now = now
	return &c
}

// Sign returns a URL-safe token for subscriber id and purpose. Confirm,
// preferences and resubscribe tokens carry an expiry; unsubscribe
// tokens do not, because an old digest's unsubscribe link must keep
// working (RFC 8058 and the mailbox providers expect it).
func (s *Signer) Sign(p Purpose, id int64) string {
	return s.SignTopic(p, id, "")
}

// SignTopic is Sign for a token that also names a topic: an unsubscribe
// link that leaves only the topic of the mail it came in.
func (s *Signer) SignTopic(p Purpose, id int64, topic string) string {
	return s.SignIssue(p, id, topic, 0)
}

// SignIssue is SignTopic for a link in an issue's mail: the token also
// names the issue (issue > 0), inside the signed bytes, so an unsubscribe
// through it is counted against that issue and nobody can move the count
// to another. topic may be "" (a preferences link).
func (s *Signer) SignIssue(p Purpose, id int64, topic string, issue int64) string {
	exp := int64(0)
	switch p {
	case Confirm:
		exp = s.now().Add(s.confirmTTL).Unix()
	case Preferences:
		exp = s.now().Add(PreferencesTTL).Unix()
	case Resubscribe:
		exp = s.now().Add(ResubscribeTTL).Unix()
	}
	body := string(p) + "\n" + strconv.FormatInt(id, 10) + "\n" + strconv.FormatInt(exp, 10)
	switch {
	case issue > 0:
		body += "\n" + topic + "\n" + strconv.FormatInt(issue, 10)
	case topic != "":
		body += "\n" + topic
	}
	return enc.EncodeToString([]byte(body)) + "." + enc.EncodeToString(mac(s.key, body))
}

// Verify checks tok for purpose p and returns whom it names. A genuine
// token past its expiry answers ErrExpired with whom it names (the
// preferences page offers that person a fresh link); any other error
// the zero Subject.
func (s *Signer) Verify(p Purpose, tok string) (Subject, error) {
	b64body, b64mac, ok := strings.Cut(tok, ".")
	if !ok {
		return Subject{}, ErrInvalid
	}
	body, ok := decode(b64body)
	if !ok {
		return Subject{}, ErrInvalid
	}
	sum, ok := decode(b64mac)
	if !ok {
		return Subject{}, ErrInvalid
	}
	var legacy bool
	switch {
	case hmac.Equal(sum, mac(s.key, string(body))):
	case hmac.Equal(sum, mac(s.legacyKey, string(body))):
		legacy = true
	default:
		return Subject{}, ErrInvalid
	}
	parts := strings.Split(string(body), "\n")
	if len(parts) < 3 || len(parts) > 5 || Purpose(parts[0]) != p {
		return Subject{}, ErrInvalid
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return Subject{}, ErrInvalid
	}
	var sub Subject
	if len(parts) >= 4 {
		sub.Topic = parts[3]
	}
	if len(parts) == 5 {
		// Only the spelling SignIssue writes: a positive number in
		// canonical decimal, so each signed link has one meaning.
		sub.Issue, err = strconv.ParseInt(parts[4], 10, 64)
		if legacy || err != nil || sub.Issue <= 0 || strconv.FormatInt(sub.Issue, 10) != parts[4] {
			return Subject{}, ErrInvalid
		}
	}
	if legacy {
		if parts[1] == "" {
			return Subject{}, ErrInvalid
		}
		sub.Email = parts[1]
	} else if sub.ID, err = strconv.ParseInt(parts[1], 10, 64); err != nil || sub.ID <= 0 {
		return Subject{}, ErrInvalid
	}
	if exp == 0 && p == Preferences {
		return sub, fmt.Errorf("%w (issued without an expiry)", ErrExpired)
	}
	if exp != 0 && s.now().Unix() > exp {
		return sub, fmt.Errorf("%w (at %s)", ErrExpired, time.Unix(exp, 0).UTC().Format(time.RFC3339))
	}
	return sub, nil
}

// decode reads one part of a token: only its canonical spelling (the
// decoder would skip line breaks and, without Strict, ignore the unused
// bits of the last character).
func decode(s string) ([]byte, bool) {
	b, err := enc.DecodeString(s)
	if err != nil || enc.EncodeToString(b) != s {
		return nil, false
	}
	return b, true
}

// Fingerprint is a keyed hash of b, in hex: the same b gives the same
// fingerprint, and without the service's secret it says nothing of b,
// not even by trying guesses (an address among an event's fields, which
// an Idempotency-Key's record must not keep in a form an erasure would
// have to find).
func (s *Signer) Fingerprint(b []byte) string {
	var sum [keyedmac.Size]byte
	return hex.EncodeToString(s.fingerprint.Sum(sum[:0], b))
}

// mac is body's MAC under key. Every mail carries a signed unsubscribe
// link, so the key's hash is reused (keyedmac), not made anew per token.
func mac(key *keyedmac.Key, body string) []byte { return key.SumString(nil, body) }
