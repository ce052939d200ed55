package fcm

import "net/http"

// RefreshEarly is refreshEarly.
const RefreshEarly = refreshEarly

// ParseError classes an answer of status with body and Retry-After.
func ParseError(status int, body, retryAfter string) error {
	resp := &http.Response{StatusCode: status, Header: http.Header{}}
	if retryAfter != "" {
		resp.Header.Set("Retry-After", retryAfter)
	}
	return parseError(resp, []byte(body))
}

// Waiting counts the sends waiting for one of c's streams.
func (c *Client) Waiting() int { return int(c.waiting.Load()) }
