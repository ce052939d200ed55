package apns

import "time"

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
