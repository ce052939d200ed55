package feedback

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/newsletter/newsletter/internal/logredact"
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

// SES reads Amazon SES notifications delivered by SNS over HTTPS. Each
// message is verified against its signing certificate (fetched once per
// URL, only from an SNS host, never following a redirect), must come from
// one of TopicARNs and be no older than an hour. Subscription
// confirmations are verified and logged with their URL for the operator to
// open; nothing is confirmed by itself.
type SES struct {
	TopicARNs []string
	// Client fetches the certificates (a client with a 5 s timeout when
	// nil); its redirects are never followed.
	Client *http.Client
	Tags   *Tagger
	Now    func() time.Time
	Log    *slog.Logger

	mu    sync.Mutex
	certs map[string]*certLookup
}

// certLookup is one certificate URL's look-up: done is closed when cert
// or err is set; a failure is retried after until.
type certLookup struct {
	done  chan struct{}
	cert  *x509.Certificate
	err   error
	until time.Time
}

type snsMessage struct {
	Type, MessageId, Token, TopicArn, Subject, Message, Timestamp string
	SignatureVersion, Signature, SigningCertURL, SubscribeURL     string
}

// stringToSign is the canonical form SNS signs: "Key\nValue\n" for each
// field of the message type, in this order, Subject only when present.
func (m *snsMessage) stringToSign() string {
	var b strings.Builder
	add := func(k, v string) { b.WriteString(k + "\n" + v + "\n") }
	add("Message", m.Message)
	add("MessageId", m.MessageId)
	if m.Type == "Notification" {
		if m.Subject != "" {
			add("Subject", m.Subject)
		}
		add("Timestamp", m.Timestamp)
		add("TopicArn", m.TopicArn)
		add("Type", m.Type)
		return b.String()
	}
	add("SubscribeURL", m.SubscribeURL)
	add("Timestamp", m.Timestamp)
	add("Token", m.Token)
	add("TopicArn", m.TopicArn)
	add("Type", m.Type)
	return b.String()
}

// Events implements ProviderWebhook.
func (s *SES) Events(r *http.Request, body []byte) ([]Event, error) {
	var m snsMessage
	if err := json.Unmarshal(body, &m); err != nil || m.Type == "" || m.Signature == "" {
		return nil, unauthorized("not a signed SNS message")
	}
	if !slices.Contains(s.TopicARNs, m.TopicArn) {
		return nil, unauthorized("topic " + logredact.Clip(m.TopicArn) + " is not in NEWSLETTER_SES_TOPIC_ARNS")
	}
	at, err := time.Parse(time.RFC3339, m.Timestamp)
	if err != nil || !fresh(at, s.now(), time.Hour) {
		return nil, unauthorized("timestamp missing or older than an hour")
	}
	if err := s.verify(r, &m); err != nil {
		return nil, err
	}
	switch m.Type {
	case "SubscriptionConfirmation", "UnsubscribeConfirmation":
		s.log().Warn("SES webhook: SNS asks to confirm the subscription; open this URL once to start receiving events",
			"type", logredact.Clip(m.Type), "topic", logredact.Clip(m.TopicArn), "url", logredact.Clip(m.SubscribeURL))
		return nil, nil
	case "Notification":
		return sesEvents(m.Message, s.Tags)
	}
	return nil, fmt.Errorf("SNS message type %q", m.Type)
}

func (s *SES) verify(r *http.Request, m *snsMessage) error {
	u, err := url.Parse(m.SigningCertURL)
	if err != nil || u.Scheme != "https" || !snsHost.MatchString(u.Hostname()) || u.Port() != "" {
		return unauthorized("signing certificate URL is not an SNS host")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || !snsCertPath.MatchString(u.EscapedPath()) {
		return unauthorized("signing certificate URL is not an SNS certificate")
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil {
		return unauthorized("signature is not base64")
	}
	cert, err := s.cert(r, u.String())
	if err != nil {
		return unauthorized("signing certificate: " + err.Error())
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return unauthorized("signing certificate has no RSA key")
	}
	data := []byte(m.stringToSign())
	switch m.SignatureVersion {
	case "1":
		h := sha1.Sum(data)
		err = rsa.VerifyPKCS1v15(pub, crypto.SHA1, h[:], sig)
	case "2":
		h := sha256.Sum256(data)
		err = rsa.VerifyPKCS1v15(pub, crypto.SHA256, h[:], sig)
	default:
		return unauthorized("unknown SignatureVersion " + logredact.Clip(m.SignatureVersion))
	}
	if err != nil {
		return unauthorized("signature does not verify")
	}
	return nil
}

// cert is the certificate at certURL: remembered, or fetched by one
// request while the others wait for it.
func (s *SES) cert(r *http.Request, certURL string) (*x509.Certificate, error) {
	now := s.now()
	s.mu.Lock()
	l, ok := s.certs[certURL]
	// l.err and l.until are written before done is closed: read them after.
	if ok && isClosed(l.done) && l.err != nil && !now.Before(l.until) {
		ok = false // a failure remembered long enough: look again
	}
	if !ok {
		if s.certs == nil {
			s.certs = map[string]*certLookup{}
		}
		s.forgetOne(now)
		l = &certLookup{done: make(chan struct{})}
		s.certs[certURL] = l
		s.mu.Unlock()
		// Not the request's context: a client that hangs up must not
		// leave a failure for the others to remember.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		l.cert, l.err = s.fetch(ctx, certURL)
		cancel()
		l.until = s.now().Add(certFailureTTL)
		close(l.done)
		if l.err != nil {
			s.log().Warn("SES webhook: signing certificate look-up failed; refused until it is tried again", "url", logredact.Clip(certURL), "err", logredact.Clip(l.err.Error()), "retry_after", certFailureTTL)
		}
		return l.cert, l.err
	}
	s.mu.Unlock()
	select {
	case <-l.done:
		return l.cert, l.err
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

// forgetOne makes room for a new look-up when maxCerts are remembered:
// an expired failure if any, else any failure, else any finished one. The
// caller holds s.mu.
func (s *SES) forgetOne(now time.Time) {
	if len(s.certs) < maxCerts {
		return
	}
	var victim string
	rank := 0
	for u, l := range s.certs {
		r := 0
		switch {
		case !isClosed(l.done):
			continue // being fetched: others wait for it
		case l.err != nil && !now.Before(l.until):
			r = 3
		case l.err != nil:
			r = 2
		default:
			r = 1
		}
		if r > rank {
			victim, rank = u, r
		}
	}
	if rank > 0 {
		delete(s.certs, victim)
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// noRedirect refuses every redirect: the certificate must be at the URL
// that passed the host check, not wherever that answer points.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (s *SES) fetch(ctx context.Context, certURL string) (*x509.Certificate, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	if s.Client != nil {
		c := *s.Client
		client = &c
	}
	client.CheckRedirect = noRedirect
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, certURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch: %s (redirects are not followed)", resp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func (s *SES) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *SES) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

type sesRecipient struct {
	EmailAddress   string `json:"emailAddress"`
	DiagnosticCode string `json:"diagnosticCode"`
}

// sesEvents reads an SES notification (notificationType) or event
// (eventType) of type Bounce or Complaint; others give none.
func sesEvents(message string, tags *Tagger) ([]Event, error) {
	var n struct {
		NotificationType string `json:"notificationType"`
		EventType        string `json:"eventType"`
		Bounce           struct {
			BounceType        string         `json:"bounceType"`
			BounceSubType     string         `json:"bounceSubType"`
			BouncedRecipients []sesRecipient `json:"bouncedRecipients"`
			FeedbackID        string         `json:"feedbackId"`
		} `json:"bounce"`
		Complaint struct {
			ComplainedRecipients  []sesRecipient `json:"complainedRecipients"`
			FeedbackID            string         `json:"feedbackId"`
			ComplaintFeedbackType string         `json:"complaintFeedbackType"`
		} `json:"complaint"`
		Mail struct {
			CommonHeaders struct {
				MessageID string `json:"messageId"`
			} `json:"commonHeaders"`
		} `json:"mail"`
	}
	if err := json.Unmarshal([]byte(message), &n); err != nil {
		return nil, fmt.Errorf("SES notification: %w", err)
	}
	kind := n.NotificationType
	if kind == "" {
		kind = n.EventType
	}
	msgID := n.Mail.CommonHeaders.MessageID
	var out []Event
	switch kind {
	case "Bounce":
		typ := "soft" // Transient, Undetermined
		if n.Bounce.BounceType == "Permanent" {
			typ = "hard"
		}
		for _, r := range n.Bounce.BouncedRecipients {
			out = append(out, payload("ses", n.Bounce.FeedbackID+"/"+r.EmailAddress, r.EmailAddress, typ, n.Bounce.BounceSubType+" "+r.DiagnosticCode, msgID, tags))
		}
	case "Complaint":
		if n.Complaint.ComplaintFeedbackType == "not-spam" {
			return nil, nil
		}
		for _, r := range n.Complaint.ComplainedRecipients {
			out = append(out, payload("ses", n.Complaint.FeedbackID+"/"+r.EmailAddress, r.EmailAddress, "complaint", n.Complaint.ComplaintFeedbackType, msgID, tags))
		}
	}
	return out, nil
}

// ---- SendGrid ----

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
	var events []struct {
		Email     string `json:"email"`
		Event     string `json:"event"`
		Type      string `json:"type"`
		ID        string `json:"sg_event_id"`
		Reason    string `json:"reason"`
		MessageID string `json:"smtp-id"`
	}
	if err := json.Unmarshal(body, &events); err != nil {
		return nil, fmt.Errorf("SendGrid events: %w", err)
	}
	var out []Event
	for _, e := range events {
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
	return []Event{payload("mailgun", e.ID, e.Recipient, typ, e.Reason, msgID, m.Tags)}, nil
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
