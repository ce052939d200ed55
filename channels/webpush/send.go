package webpush

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/netguard"
)

// Sender sends one notification to one subscription. The lane's handler
// takes it as an interface, so its tests can stand in for the network.
type Sender interface {
	Send(ctx context.Context, s Subscription, payload []byte, o Options) error
}

// Urgency is the Urgency header (RFC 8030 section 5.3): how soon a device
// on battery should wake for the message.
type Urgency string

// The urgencies of RFC 8030.
const (
	UrgencyVeryLow Urgency = "very-low"
	UrgencyLow     Urgency = "low"
	UrgencyNormal  Urgency = "normal"
	UrgencyHigh    Urgency = "high"
)

// Options are a message's delivery settings.
type Options struct {
	// TTL is how long the push service keeps the message for a browser
	// that is offline (RFC 8030 section 5.2), in whole seconds; 0 means
	// DefaultTTL.
	TTL time.Duration
	// Urgency, when set, is sent as the Urgency header.
	Urgency Urgency
	// Topic, when set, replaces a message of the same topic still waiting
	// at the push service (RFC 8030 section 5.4): up to 32 characters of
	// base64url.
	Topic string
}

// DefaultTTL is how long a push service keeps a notification for an
// offline browser unless told otherwise: a day, after which news is old.
const DefaultTTL = 24 * time.Hour

// The classes of a push service's refusal; a *StatusError matches one of
// them with errors.Is.
var (
	// ErrGone: 404 or 410, the subscription has expired or was
	// withdrawn. Delete it; never retry.
	ErrGone = errors.New("push subscription is gone")
	// ErrUnavailable: 429 or 5xx. Retry, no sooner than RetryAfter.
	ErrUnavailable = errors.New("push service unavailable")
	// ErrRefused: any other refusal (400 bad request, 401/403 VAPID not
	// accepted, 413 too large, an answered redirect). Retrying cannot help.
	ErrRefused = errors.New("push service refused the message")
)

// StatusError is a push service's answer other than 2xx.
type StatusError struct {
	Status int
	// RetryAfter is what a 429 or 5xx asked for in Retry-After (seconds
	// or an HTTP date), at most MaxRetryAfter; 0 when it did not say.
	RetryAfter time.Duration
	// Detail is the start of the answer's body, for the log.
	Detail string
}

// MaxRetryAfter caps a Retry-After: endpoints are handed in by browsers,
// so one could ask us to hold a message for a year.
const MaxRetryAfter = time.Hour

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("push service answered %d %s", e.Status, http.StatusText(e.Status))
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap gives the class: ErrGone, ErrUnavailable or ErrRefused.
func (e *StatusError) Unwrap() error {
	switch {
	case e.Status == http.StatusNotFound || e.Status == http.StatusGone:
		return ErrGone
	case e.Status == http.StatusTooManyRequests || e.Status >= 500:
		return ErrUnavailable
	default:
		return ErrRefused
	}
}

// Permanent reports whether retrying err cannot succeed: the subscription
// is gone or bad, the message refused or too large. Anything else (an
// unavailable service, a network error, a timeout) is worth a retry.
func Permanent(err error) bool {
	return errors.Is(err, ErrGone) || errors.Is(err, ErrRefused) ||
		errors.Is(err, ErrBadSubscription) || errors.Is(err, ErrTooLarge)
}

// RetryAfter is how long the push service asked to wait before a retry
// (0: it did not say, use the lane's own backoff). Besides a *StatusError
// it reads any error in err's chain with a RetryAfter method, so the
// mobile senders (push/fcm, push/apns), whose errors carry more than a
// status, are read the same way by the lane.
func RetryAfter(err error) time.Duration {
	var se *StatusError
	if errors.As(err, &se) {
		return se.RetryAfter
	}
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return ra.RetryAfter()
	}
	return 0
}

// maxDetail is how much of an error answer's body is kept.
const maxDetail = 512

// Client sends notifications over HTTP, signed with one VAPID identity.
type Client struct {
	http  *http.Client
	vapid *VAPID
	now   func() time.Time
}

// NewClient returns a Client posting through hc, which should come from
// netguard.Guard.Client: its dialer refuses private addresses and it
// follows no redirects.
func NewClient(v *VAPID, hc *http.Client) *Client {
	return &Client{http: hc, vapid: v, now: time.Now}
}

// Send encrypts payload for s and posts it to s's endpoint (RFC 8030
// section 5). nil means the push service took the message (2xx); see
// the package doc for the errors.
func (c *Client) Send(ctx context.Context, s Subscription, payload []byte, o Options) error {
	u, err := url.Parse(s.Endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%w: endpoint is not an https URL", ErrBadSubscription)
	}
	body, err := Encrypt(s, payload)
	if err != nil {
		return err
	}
	auth, err := c.vapid.authorization(audience(u), c.now())
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadSubscription, err)
	}
	ttl := o.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	h := req.Header
	h["Content-Type"] = []string{"application/octet-stream"}
	h["Content-Encoding"] = []string{"aes128gcm"}
	h["Ttl"] = []string{strconv.FormatInt(int64(ttl/time.Second), 10)}
	h["Authorization"] = []string{auth}
	if o.Urgency != "" {
		h["Urgency"] = []string{string(o.Urgency)}
	}
	if o.Topic != "" {
		h["Topic"] = []string{o.Topic}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("push to %s: %w", audience(u), HideURL(err, audience(u)+"/…"))
	}
	defer func() { _ = resp.Body.Close() }() // the answer is read; a close error changes nothing
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// Read the (usually empty) answer so the connection is reused; the
		// status line already said the message was taken.
		_, _ = netguard.ReadLimited(resp.Body, maxDetail)
		return nil
	}
	detail, _ := netguard.ReadLimited(resp.Body, maxDetail) // best effort: the status is the answer
	se := &StatusError{Status: resp.StatusCode, Detail: strings.TrimSpace(string(detail))}
	if errors.Is(se, ErrUnavailable) {
		se.RetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), c.now())
	}
	return se
}

// ParseRetryAfter reads a Retry-After value (RFC 9110 section 10.2.3):
// delay seconds or an HTTP date, capped at MaxRetryAfter; 0 when absent,
// unreadable or past.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}

// HideURL keeps a capability URL (a browser's endpoint, APNs' device
// path) out of an error that a log or the task queue keeps: net/http's
// *url.Error quotes the URL whole, so it is replaced by shown.
func HideURL(err error, shown string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = shown
	}
	return err
}
