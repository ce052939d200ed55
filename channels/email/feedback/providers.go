package feedback

import (
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ErrUnauthorized means a webhook request is unsigned, forged, stale or
// from a source not configured: answer 401 and apply nothing.
var ErrUnauthorized = errors.New("webhook request not verified")

// A ProviderWebhook verifies one provider's request (its bounce and
// complaint events, coming in) and reads its events. Not to be confused
// with package webhook, the events this service sends out.
type ProviderWebhook interface {
	// Events verifies r (whose body is body) and returns its reports. An
	// ErrUnauthorized error means 401; any other error a request that
	// verified but could not be read (400).
	Events(r *http.Request, body []byte) ([]Event, error)
}

func unauthorized(why string) error { return fmt.Errorf("%w: %s", ErrUnauthorized, why) }

// ErrUnavailable means a request could not be checked for now (Redis
// away): answer 503, and the provider delivers it again later.
var ErrUnavailable = errors.New("webhook request cannot be checked just now")

// fresh tells whether a signed timestamp is within window of now, either
// way: a replayed old request is refused.
func fresh(at, now time.Time, window time.Duration) bool {
	d := now.Sub(at)
	return d < window && d > -window
}

// payload completes a provider's report: the kind and subscriber from our
// Message-ID's tag when the provider passes it on, the address otherwise.
func payload(source, id, email, typ, reason, messageID string, tags *Tagger) Event {
	p := Event{ID: source + "-" + id, Email: normalise(email), Type: typ, Source: source, Reason: reason}
	if id == "" {
		p.ID = ""
	}
	if tr, ok := tags.Trace(TagOfMessageID(messageID)); ok {
		p.SubscriberID, p.Kind, p.IssueID = tr.Subscriber, tr.Kind, tr.Issue
		if tr.Kind == KindTest {
			// A test send's tester is no subscriber: the report must
			// not reach a subscriber of the same address either.
			p.Email, p.IssueID = "", 0
		}
	}
	return p
}

// ---- Amazon SES through SNS ----

// snsHost is the host a signing certificate must come from: an SNS
// endpoint of some region, never an address the request chose.
var snsHost = regexp.MustCompile(`^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$`)

// snsCertPath is the path of SNS's signing certificates.
var snsCertPath = regexp.MustCompile(`^/SimpleNotificationService-[A-Za-z0-9_-]{1,64}\.pem$`)

// Certificate look-ups: a certificate is kept while the process runs (SNS
// rotates them rarely, under a new URL); a failed look-up is remembered
// for certFailureTTL, so unauthenticated requests naming a certificate
// that cannot be had do not make a request to it each; at most maxCerts
// URLs are remembered.
const (
	certFailureTTL = 10 * time.Minute
	maxCerts       = 64
)

// ParseSendGridKey reads the verification key SendGrid shows for its
// signed event webhook: base64 of an ECDSA public key in DER.
func ParseSendGridKey(b64 string) (*ecdsa.PublicKey, error) {
	der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return nil, fmt.Errorf("sendgrid key: %w", err)
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("sendgrid key: %w", err)
	}
	pub, ok := k.(*ecdsa.PublicKey)
	if !ok {
		return nil, errors.New("sendgrid key: not an ECDSA key")
	}
	return pub, nil
}

// SendGrid reads SendGrid's signed event webhook: the ECDSA signature
// (X-Twilio-Email-Event-Webhook-Signature) over the timestamp header and
// the raw body, with a timestamp within ten minutes.
type SendGrid struct {
	Key  *ecdsa.PublicKey
	Tags *Tagger
	Now  func() time.Time
}

// The headers of SendGrid's signed event webhook.
const (
	SendGridSignatureHeader = "X-Twilio-Email-Event-Webhook-Signature"
	SendGridTimestampHeader = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// Events implements ProviderWebhook.
func (s *SendGrid) Events(r *http.Request, body []byte) ([]Event, error) {
	ts := r.Header.Get(SendGridTimestampHeader)
	sig, err := base64.StdEncoding.DecodeString(r.Header.Get(SendGridSignatureHeader))
	if err != nil || len(sig) == 0 || ts == "" {
		return nil, unauthorized("no SendGrid signature")
	}
	h := sha256.Sum256(append([]byte(ts), body...))
	if !ecdsa.VerifyASN1(s.Key, h[:], sig) {
		return nil, unauthorized("SendGrid signature does not verify")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || !fresh(time.Unix(sec, 0), nowOr(s.Now), 10*time.Minute) {
		return nil, unauthorized("SendGrid timestamp is stale")
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("SendGrid events: %w", err)
	}
	var out []Event
	for _, r := range raw {
		var e struct {
			Email     string `json:"email"`
			Event     string `json:"event"`
			Type      string `json:"type"`
			ID        string `json:"sg_event_id"`
			Reason    string `json:"reason"`
			MessageID string `json:"smtp-id"`
		}
		if err := json.Unmarshal(r, &e); err != nil {
			return nil, fmt.Errorf("SendGrid event: %w", err)
		}
		if e.ID == "" {
			// An event is applied once by its id; one without is named
			// by its signed bytes (SendGrid's events carry their own
			// time), so the same event twice, in one body, a replayed
			// one or SendGrid's retry signed anew, is seen before.
			sum := sha256.Sum256(r)
			e.ID = "sha256-" + hex.EncodeToString(sum[:16])
		}
		typ := ""
		switch {
		case e.Event == "bounce" && e.Type == "blocked":
			typ = "soft" // refused for now (reputation, content), not a dead address
		case e.Event == "bounce":
			typ = "hard"
		case e.Event == "spamreport":
			typ = "complaint"
		default:
			continue // delivered, deferred, dropped (already suppressed there), opens…
		}
		out = append(out, payload("sendgrid", e.ID, e.Email, typ, e.Reason, e.MessageID, s.Tags))
	}
	return out, nil
}

func nowOr(now func() time.Time) time.Time {
	if now != nil {
		return now()
	}
	return time.Now()
}

// ---- Mailgun ----

// mailgunWindow is how far a Mailgun timestamp may be from now.
const mailgunWindow = 10 * time.Minute

// Mailgun reads Mailgun's webhooks: the HMAC-SHA256 of timestamp and token
// under the webhook signing key, with a timestamp within ten minutes. The
// signature does not cover the body, so each token is remembered (Nonces)
// until its timestamp is stale: a captured {timestamp, token, signature}
// with another body is refused.
type Mailgun struct {
	SigningKey []byte
	// Nonces remembers the tokens used; nil: not remembered (tests of
	// the signature alone).
	Nonces Nonces
	Tags   *Tagger
	Now    func() time.Time
}

// Events implements ProviderWebhook.
func (m *Mailgun) Events(r *http.Request, body []byte) ([]Event, error) {
	var b struct {
		Signature struct {
			Timestamp string `json:"timestamp"`
			Token     string `json:"token"`
			Signature string `json:"signature"`
		} `json:"signature"`
		Event struct {
			Event     string `json:"event"`
			Severity  string `json:"severity"`
			Recipient string `json:"recipient"`
			ID        string `json:"id"`
			Reason    string `json:"reason"`
			Message   struct {
				Headers struct {
					MessageID string `json:"message-id"`
				} `json:"headers"`
			} `json:"message"`
		} `json:"event-data"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, unauthorized("not a signed Mailgun event")
	}
	s := b.Signature
	mac := hmac.New(sha256.New, m.SigningKey)
	mac.Write([]byte(s.Timestamp + s.Token))
	want := hex.EncodeToString(mac.Sum(nil))
	if s.Signature == "" || subtle.ConstantTimeCompare([]byte(strings.ToLower(s.Signature)), []byte(want)) != 1 {
		return nil, unauthorized("Mailgun signature does not verify")
	}
	sec, err := strconv.ParseInt(s.Timestamp, 10, 64)
	now := nowOr(m.Now)
	if err != nil || !fresh(time.Unix(sec, 0), now, mailgunWindow) {
		return nil, unauthorized("Mailgun timestamp is stale")
	}
	if m.Nonces != nil {
		// Remembered until the timestamp is stale anyway.
		digest := sha256.Sum256(body)
		first, err := m.Nonces.Use(r.Context(), "mailgun\x00"+s.Token, hex.EncodeToString(digest[:]), time.Unix(sec, 0).Add(mailgunWindow).Sub(now)+time.Second)
		if err != nil {
			return nil, fmt.Errorf("%w: remember the Mailgun token: %v", ErrUnavailable, err)
		}
		if !first {
			return nil, unauthorized("Mailgun token was used before by another request (a replay)")
		}
	}
	e := b.Event
	typ := ""
	switch {
	case e.Event == "failed" && e.Severity == "permanent":
		typ = "hard"
	case e.Event == "failed":
		typ = "soft"
	case e.Event == "complained":
		typ = "complaint"
	default:
		return nil, nil
	}
	msgID := e.Message.Headers.MessageID
	if msgID != "" && !strings.HasPrefix(msgID, "<") {
		msgID = "<" + msgID + ">"
	}
	id := e.ID
	if id == "" {
		// The same body is let through again (Mailgun retrying an answer
		// it did not see), and an event is applied once by its id: one
		// without an id is named by its signed token, which is Mailgun's
		// one per delivery, so a replay of it is seen before.
		id = "token-" + s.Token
	}
	return []Event{payload("mailgun", id, e.Recipient, typ, e.Reason, msgID, m.Tags)}, nil
}

// ---- Postmark ----

// Postmark reads Postmark's bounce and spam-complaint webhooks, which
// Postmark sends with HTTP Basic auth: user "postmark", password Token.
type Postmark struct {
	Token string
	Tags  *Tagger
}

// Events implements ProviderWebhook.
func (p *Postmark) Events(r *http.Request, body []byte) ([]Event, error) {
	user, pass, ok := r.BasicAuth()
	if !ok || subtle.ConstantTimeCompare([]byte(user+"\x00"+pass), []byte("postmark\x00"+p.Token)) != 1 {
		return nil, unauthorized("Postmark credentials")
	}
	var b struct {
		RecordType, Type, Email, Description string
		ID                                   json.Number
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("Postmark event: %w", err)
	}
	typ := ""
	switch {
	case b.RecordType == "SpamComplaint" || b.Type == "SpamComplaint":
		typ = "complaint"
	case b.RecordType != "Bounce":
		return nil, nil
	case b.Type == "HardBounce" || b.Type == "BadEmailAddress" || b.Type == "ManuallyDeactivated":
		typ = "hard"
	case b.Type == "SoftBounce" || b.Type == "Transient" || b.Type == "DnsError" || b.Type == "Blocked" || b.Type == "ChallengeVerification":
		typ = "soft"
	default:
		return nil, nil // auto-responders, subscribe requests, tests
	}
	return []Event{payload("postmark", b.ID.String(), b.Email, typ, b.Type+" "+b.Description, "", p.Tags)}, nil
}
