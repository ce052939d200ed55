package adminauth

import (
	"context"
	"fmt"
)

// TokenMaker stores a new token by its hash (store.Redis's CreateToken).
type TokenMaker interface {
	CreateToken(ctx context.Context, hash string, t StoredToken) (StoredToken, error)
}

// BadTokenRequest is a name or role MakeToken refuses: the caller's to
// fix, nothing stored.
type BadTokenRequest struct{ Err error }

func (e *BadTokenRequest) Error() string { return e.Err.Error() }
func (e *BadTokenRequest) Unwrap() error { return e.Err }

// MakeToken checks name and role, makes up a new token and stores only
// its hash, for `newsletter token create` and the console alike. The
// token is returned to be shown once; it cannot be read back. Errors: a
// *BadTokenRequest, or the store's (a name taken, too many tokens).
func MakeToken(ctx context.Context, m TokenMaker, name, role string) (string, StoredToken, error) {
	if err := CheckTokenName(name); err != nil {
		return "", StoredToken{}, &BadTokenRequest{err}
	}
	r, err := ParseRole(role)
	if err != nil {
		return "", StoredToken{}, &BadTokenRequest{err}
	}
	tok := NewToken()
	made, err := m.CreateToken(ctx, HashToken(tok), StoredToken{Name: name, Role: r})
	if err != nil {
		return "", made, fmt.Errorf("token %q: %w", name, err)
	}
	return tok, made, nil
}
