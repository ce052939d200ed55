package adminauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// TokenStore finds stored tokens by their hash (store.Redis). Only the
// hash is ever stored: a copy of the database opens nothing.
type TokenStore interface {
	// LookupToken is the principal of the token whose HashToken is hash,
	// or ErrUnknownToken (none, or revoked).
	LookupToken(ctx context.Context, hash string) (Principal, error)
}

// ErrUnknownToken is a token nobody holds (wrong, or revoked).
var ErrUnknownToken = errors.New("unknown token")

// ErrTokenStore wraps a token store's failure: neither a yes nor a no
// (503, never a lock-out).
var ErrTokenStore = errors.New("token store unavailable")

// HashToken is what the store keeps of a token: its SHA-256, as hex. A
// plain hash suffices (no salt, no slow hash): tokens are 128 random bits,
// which no dictionary holds.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// StoredToken is a stored token as lists show it: never the token itself.
type StoredToken struct {
	Name    string
	Role    Role
	Created time.Time
}

// MaxTokenName is the longest token name.
const MaxTokenName = 64

// CheckTokenName reports whether name may name a stored token: 1 to
// MaxTokenName letters, digits, '.', '_' or '-' (it is shown in the
// audit log, so nothing that needs quoting), and not EnvPrincipal's name.
func CheckTokenName(name string) error {
	if name == "" || len(name) > MaxTokenName {
		return fmt.Errorf("token name: 1 to %d characters", MaxTokenName)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("token name %q: letters, digits, '.', '_' and '-' only", name)
		}
	}
	if name == EnvPrincipal.Name {
		return fmt.Errorf("token name %q is NEWSLETTER_ADMIN_TOKEN's", name)
	}
	return nil
}
