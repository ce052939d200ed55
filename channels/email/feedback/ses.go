package feedback

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/newsletter/newsletter/internal/logredact"
)

// Amazon SES reports bounces and complaints through SNS: a signed
// message whose certificate is fetched from AWS and kept.

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
