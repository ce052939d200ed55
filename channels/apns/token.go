package apns

import (
	"fmt"

	"github.com/newsletter/newsletter/channels/webpush"
)

// The bounds of a device token's length in hex digits. Apple's tokens
// have been 32 bytes (64 digits); Apple says their length may grow and
// not to hard-code it, so up to 100 bytes are taken.
const (
	MinTokenLength = 64
	MaxTokenLength = 200
)

// ErrBadToken is wrapped by ValidToken's errors. It is push.ErrGone: a
// token of the wrong shape can never be delivered to, so a stored one is
// deleted like an unregistered one.
var ErrBadToken = fmt.Errorf("%w: not an APNs device token", webpush.ErrGone)

// ValidToken checks a device token's shape: hex digits (either case), an
// even number of them, MinTokenLength to MaxTokenLength.
func ValidToken(token string) error {
	n := len(token)
	if n < MinTokenLength || n > MaxTokenLength || n%2 != 0 {
		return fmt.Errorf("%w: %d characters, want an even number from %d to %d", ErrBadToken, n, MinTokenLength, MaxTokenLength)
	}
	for i := 0; i < n; i++ {
		c := token[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return fmt.Errorf("%w: character %q at %d is not hex", ErrBadToken, c, i)
		}
	}
	return nil
}
