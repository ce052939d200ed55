package apns

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/newsletter/newsletter/channels/webpush"
)

// Error is APNs' answer other than 200. It matches push.ErrGone,
// push.ErrUnavailable or push.ErrRefused with errors.Is, and
// push.RetryAfter reads its Retry-After.
type Error struct {
	Status int
	// Reason is APNs' reason (Unregistered, BadDeviceToken, ...).
	Reason string
	// Timestamp is, for a 410, when APNs last knew the token valid.
	Timestamp time.Time

	class      error
	retryAfter time.Duration
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("apns answered %d %s", e.Status, http.StatusText(e.Status))
	if e.Reason != "" {
		msg += " " + e.Reason
	}
	if e.retryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.retryAfter)
	}
	return msg
}

// Unwrap gives the class: push.ErrGone, push.ErrUnavailable or
// push.ErrRefused.
func (e *Error) Unwrap() error { return e.class }

// RetryAfter is what a 429 or 5xx asked for in Retry-After, at most
// push.MaxRetryAfter; 0 when it did not say.
func (e *Error) RetryAfter() time.Duration { return e.retryAfter }

// parseError reads an error answer ({"reason":…,"timestamp":ms}); an
// unreadable body leaves the status to decide.
func parseError(resp *http.Response, answer []byte, now time.Time) *Error {
	e := &Error{Status: resp.StatusCode}
	var b struct {
		Reason    string `json:"reason"`
		Timestamp int64  `json:"timestamp"`
	}
	if json.Unmarshal(answer, &b) == nil {
		e.Reason = b.Reason
		if b.Timestamp > 0 {
			e.Timestamp = time.UnixMilli(b.Timestamp)
		}
	} else {
		e.Reason = strings.TrimSpace(string(answer[:min(len(answer), 200)]))
	}
	switch {
	// Only 410 (Unregistered, ExpiredToken) says the app is gone.
	// BadDeviceToken and DeviceTokenNotForTopic are refused, not gone:
	// Apple answers BadDeviceToken also for a token of the other
	// environment (sandbox or production), and DeviceTokenNotForTopic for
	// a wrong topic, so both answer every device alike when a setting is
	// wrong, and gone would delete every iOS device of the list for one
	// mistyped setting.
	case e.Status == http.StatusGone:
		e.class = webpush.ErrGone
	case e.Status == http.StatusTooManyRequests || e.Status >= 500:
		e.class = webpush.ErrUnavailable
		e.retryAfter = webpush.ParseRetryAfter(resp.Header.Get("Retry-After"), now)
	default:
		e.class = webpush.ErrRefused
	}
	return e
}
