package webpush

import (
	"time"
)

// EncryptWith is encrypt with the sender's key and salt given, for RFC
// 8291's worked example.
var EncryptWith = encrypt

// SetClock makes c read the time from now.
func (c *Client) SetClock(now func() time.Time) { c.now = now }

// AuthorizationFor is the Authorization header c would send to aud.
func (v *VAPID) AuthorizationFor(aud string, now time.Time) (string, error) {
	return v.authorization(aud, now)
}
