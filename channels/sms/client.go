package sms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultBaseURL is Twilio's REST API.
const DefaultBaseURL = "https://api.twilio.com"

// Client posts messages to a Twilio-compatible Messages API. Its fields
// are read on every Send and must not change while it is in use.
type Client struct {
	// BaseURL is the API's origin; "" means DefaultBaseURL.
	BaseURL string
	// AccountSID and AuthToken are the Basic auth credentials, and the
	// account in the path.
	AccountSID string
	AuthToken  string
	// From is the sender: an E.164 number, or a messaging service's SID
	// (it starts with "MG"), which lets the gateway pick the number.
	From string
	// StatusCallback is the URL the gateway posts each message's status
	// to ({origin}/feedback/sms), signed like an inbound message; ""
	// sends none. A failed message's error code there is the only word
	// of a number that took the message and then could not get it
	// (a landline: 30006).
	StatusCallback string
	// HTTP sends the requests; nil means one with a 30-second timeout
	// that follows no redirect (a redirect would carry the credentials
	// elsewhere, and the API answers none).
	HTTP *http.Client
}

var defaultHTTP = &http.Client{
	Timeout: 30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// The classes of a gateway's refusal; a *StatusError matches one of them
// with errors.Is.
var (
	// ErrNumberGone: the number cannot take messages from us, now or
	// later: invalid (21211), unreachable (21214), not a mobile (21614),
	// premium (21268), or its owner texted STOP (21610). Retire the
	// number, as a dead device token is deleted; never retry.
	ErrNumberGone = errors.New("sms: the number cannot receive our messages")
	// ErrUnavailable: 429 or 5xx. Retry, no sooner than RetryAfter.
	ErrUnavailable = errors.New("sms: gateway unavailable")
	// ErrRefused: any other refusal (401 bad credentials, a sender not
	// allowed for the destination, a region not enabled). Retrying cannot
	// help; the number is not to blame.
	ErrRefused = errors.New("sms: gateway refused the message")
)

// retireCodes are the Twilio error codes that are the number's fault.
// Left out on purpose, as ErrRefused: 21408 (the account may not send to
// that region: the operator's setting, which would retire every number of
// a country) and 21612 (Twilio cannot connect this To with this From: it
// is as often the sender's number as the reader's).
var retireCodes = map[int]bool{
	21211: true, // invalid 'To' phone number
	21214: true, // 'To' phone number cannot be reached
	21268: true, // 'To' is a premium-rate or information service number
	21610: true, // the recipient replied STOP: unsubscribed from this sender
	21614: true, // 'To' is not a valid mobile number
}

// statusRetireCodes are the error codes of a message's status callback
// (failed or undelivered) that say the number cannot take our texts, as
// Twilio's error dictionary describes them. Left out on purpose, as
// passing (a later text may arrive): 30001 (queue overflow: our rate),
// 30002 (account suspended: ours), 30003 (handset off or out of
// coverage: the dictionary says retry), 30004 (blocked: by the carrier
// as often as by the reader), 30007 (carrier filtering: the content or
// sender), 30008 (unknown error).
var statusRetireCodes = map[string]bool{
	"21211": true, // invalid 'To' number
	"21610": true, // the reader texted STOP to this sender
	"21614": true, // 'To' is not a mobile number
	"30005": true, // unknown destination handset: the number does not exist or no longer does
	"30006": true, // a landline, or a carrier that takes no texts
}

// RetireStatus reports whether a status callback's MessageStatus and
// ErrorCode say the number cannot take our texts: a message failed or
// undelivered with one of the permanent codes.
func RetireStatus(status, errorCode string) bool {
	return (status == "failed" || status == "undelivered") && statusRetireCodes[errorCode]
}

// StatusError is a gateway's answer other than 2xx, read from Twilio's
// error JSON {"code":…,"message":…,"more_info":…,"status":…}.
type StatusError struct {
	Status int
	// Code is Twilio's error code (0 when the answer had none).
	Code int
	// Message is the answer's message, or the start of its body when it
	// was not Twilio's JSON.
	Message string
	// RetryAfter is what a 429 or 5xx asked for in Retry-After (seconds or
	// an HTTP date), at most MaxRetryAfter; 0 when it did not say.
	RetryAfter time.Duration
}

// MaxRetryAfter caps a Retry-After, so a gateway's mistake cannot park
// the lane for a day.
const MaxRetryAfter = time.Hour

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("sms gateway answered %d %s", e.Status, http.StatusText(e.Status))
	if e.Code != 0 {
		msg += fmt.Sprintf(" (code %d)", e.Code)
	}
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Unwrap gives the class: ErrNumberGone, ErrUnavailable or ErrRefused.
func (e *StatusError) Unwrap() error {
	switch {
	case e.Status == http.StatusTooManyRequests || e.Status >= 500:
		return ErrUnavailable
	case retireCodes[e.Code]:
		return ErrNumberGone
	default:
		return ErrRefused
	}
}

// Permanent reports whether retrying err cannot succeed: the number is
// gone or the message refused. Anything else (an unavailable gateway, a
// network error, a timeout) is worth a retry.
func Permanent(err error) bool {
	return errors.Is(err, ErrNumberGone) || errors.Is(err, ErrRefused)
}

// Retire reports whether err says the number itself is dead to us, so it
// should be turned off for SMS.
func Retire(err error) bool {
	return errors.Is(err, ErrNumberGone)
}

// RetryAfter is how long the gateway asked to wait before a retry (0: it
// did not say, use the lane's own backoff).
func RetryAfter(err error) time.Duration {
	var se *StatusError
	if errors.As(err, &se) {
		return se.RetryAfter
	}
	return 0
}

// maxAnswer is how much of an answer is read: a message's JSON is about
// a kilobyte.
const maxAnswer = 64 << 10

// Send posts one message to the E.164 number to and answers the
// message's SID. nil means the gateway took the message (2xx), not that
// it reached the phone; see the package doc for the errors.
func (c *Client) Send(ctx context.Context, to, body string) (sid string, err error) {
	if c.AccountSID == "" || c.From == "" {
		return "", fmt.Errorf("%w: the client has no account SID or no sender", ErrRefused)
	}
	form := url.Values{"To": {to}, "Body": {body}}
	if strings.HasPrefix(c.From, "MG") {
		form.Set("MessagingServiceSid", c.From)
	} else {
		form.Set("From", c.From)
	}
	if c.StatusCallback != "" {
		form.Set("StatusCallback", c.StatusCallback)
	}
	base := strings.TrimRight(c.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	endpoint := base + "/2010-04-01/Accounts/" + url.PathEscape(c.AccountSID) + "/Messages.json"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrRefused, err)
	}
	req.SetBasicAuth(c.AccountSID, c.AuthToken)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("sms to %s: %w", base, err)
	}
	defer func() { _ = resp.Body.Close() }() // the answer is read; a close error changes nothing
	answer, readErr := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// The status line says the message was taken; the SID is for the
		// log. An unreadable answer is not a reason to send it again.
		var m struct {
			SID string `json:"sid"`
		}
		if readErr == nil && json.Unmarshal(answer, &m) == nil {
			sid = m.SID
		}
		return sid, nil
	}
	se := &StatusError{Status: resp.StatusCode}
	var tw struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(answer, &tw) == nil && (tw.Code != 0 || tw.Message != "") {
		se.Code, se.Message = tw.Code, tw.Message
	} else {
		se.Message = strings.TrimSpace(string(answer[:min(len(answer), 512)]))
	}
	if errors.Is(se, ErrUnavailable) {
		se.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return "", se
}

// parseRetryAfter reads a Retry-After value (RFC 9110 section 10.2.3):
// delay seconds or an HTTP date, capped at MaxRetryAfter; 0 when absent,
// unreadable or past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(MaxRetryAfter/time.Second))) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil {
		return min(max(at.Sub(now), 0), MaxRetryAfter)
	}
	return 0
}
