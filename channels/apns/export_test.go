package apns

import (
	"net/http"
	"time"
)

// TokenRefresh is tokenRefresh.
const TokenRefresh = tokenRefresh

// TokenMinAge is tokenMinAge.
const TokenMinAge = tokenMinAge

// SetClock makes c read the time from now.
func (c *Client) SetClock(now func() time.Time) {
	c.mu.Lock()
	c.now = now
	c.mu.Unlock()
}

// ParseError classes an answer of status with body and Retry-After.
func ParseError(status int, body, retryAfter string) error {
	resp := &http.Response{StatusCode: status, Header: http.Header{}}
	if retryAfter != "" {
		resp.Header.Set("Retry-After", retryAfter)
	}
	return parseError(resp, []byte(body), time.Now())
}

// Waiting counts the sends waiting for one of c's streams.
func (c *Client) Waiting() int { return int(c.waiting.Load()) }
