package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/store"
)

// InviteTTL is how long an invite link works.
const InviteTTL = 48 * time.Hour

// InvitePath is the invite page's path; + the token.
const InvitePath = "/admin/invite/"

// NewInviteToken makes up an invite's token (32 random bytes, base64url)
// and the hash the store keeps: the token is only in the mail.
func NewInviteToken() (token, hash string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, HashInviteToken(token)
}

// HashInviteToken is what the store keeps of an invite's token.
func HashInviteToken(token string) string {
	sum := sha256.Sum256([]byte("invite:" + token))
	return hex.EncodeToString(sum[:])
}

// InputError is an invite or account change the rules refuse (400, the
// form again): an address that is not one, an unknown role.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// CheckInvite reads an invite's address and role: the address normalised
// (as subscribers' are), the role one of viewer, editor, admin.
func CheckInvite(email, role string) (string, adminauth.Role, error) {
	if email == "" {
		return "", "", &InputError{errors.New("email: an address is needed")}
	}
	n, err := address.Normalize(email)
	if err != nil {
		return "", "", &InputError{fmt.Errorf("email: %v", err)}
	}
	r, err := adminauth.ParseRole(role)
	if err != nil {
		return "", "", &InputError{err}
	}
	return n, r, nil
}

// InviteRevoker ends open invites (store.Redis).
type InviteRevoker interface {
	RevokeInvite(ctx context.Context, hash, by string) (string, error)
}

// RevokeInvite ends the open invite whose id (its token's hash, 64 hex
// digits, as the console and the API list it) is id, by by: the invite's
// address, or store.ErrInviteNotFound (also for an id that is not one).
func RevokeInvite(ctx context.Context, s InviteRevoker, by adminauth.Principal, id string) (string, error) {
	if len(id) != sha256.Size*2 || strings.Trim(id, "0123456789abcdef") != "" {
		return "", store.ErrInviteNotFound
	}
	return s.RevokeInvite(ctx, id, by.Name)
}
