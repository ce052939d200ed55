package fcm

import (
	"fmt"

	"github.com/newsletter/newsletter/channels/webpush"
)

// The bounds of a registration token's length. FCM documents no format:
// tokens seen in the field are 140 to some 200 characters of
// [A-Za-z0-9_:-] (an instance id, a colon, a base64url blob). The bounds
// are loose on purpose, so a longer token format of Google's is not
// refused, while a word, an APNs hex token or a pasted paragraph is.
const (
	MinTokenLength = 32
	MaxTokenLength = 1024
)

// ErrBadToken is wrapped by ValidToken's errors. It is push.ErrGone: a
// token of the wrong shape can never be delivered to, so a stored one is
// deleted like an unregistered one.
var ErrBadToken = fmt.Errorf("%w: not an FCM registration token", webpush.ErrGone)

// ValidToken checks a registration token's shape: MinTokenLength to
// MaxTokenLength characters of A-Z, a-z, 0-9, '_', ':' and '-'.
func ValidToken(token string) error {
	if n := len(token); n < MinTokenLength || n > MaxTokenLength {
		return fmt.Errorf("%w: %d characters, want %d to %d", ErrBadToken, n, MinTokenLength, MaxTokenLength)
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == ':' || c == '-') {
			return fmt.Errorf("%w: character %q at %d, want A-Z a-z 0-9 _ : -", ErrBadToken, c, i)
		}
	}
	return nil
}
