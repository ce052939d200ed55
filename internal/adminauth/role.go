package adminauth

import (
	"context"
	"fmt"
)

// Role is what a principal may do. The roles are nested: an admin may do
// all an editor may, an editor all a viewer may.
type Role string

// The roles (docs/reference.md lists each route's).
const (
	// Viewer reads: issues, progress, previews, subscribers, digest runs.
	Viewer Role = "viewer"
	// Editor also writes issues and items, previews and test-sends.
	Editor Role = "editor"
	// Admin may do everything: suppressions, erasure, exports, tokens,
	// digest runs, webhooks, asynqmon, the profiles, the audit log.
	Admin Role = "admin"
)

// rank orders the roles; a role allows what any lower one does.
var rank = map[Role]int{Viewer: 1, Editor: 2, Admin: 3}

// Roles are the roles in ascending order.
var Roles = []Role{Viewer, Editor, Admin}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if rank[r] == 0 {
		return "", fmt.Errorf("role %q: want viewer, editor or admin", s)
	}
	return r, nil
}

// Allows reports whether r may do what need requires. An unknown role
// allows nothing, and nothing requires an unknown role.
func (r Role) Allows(need Role) bool {
	return rank[r] > 0 && rank[need] > 0 && rank[r] >= rank[need]
}

// Principal is who made a request: a stored token's name and role, or
// EnvPrincipal for NEWSLETTER_ADMIN_TOKEN.
type Principal struct {
	Name string
	Role Role
}

// EnvPrincipal is the holder of NEWSLETTER_ADMIN_TOKEN: always an admin.
var EnvPrincipal = Principal{Name: "admin-token", Role: Admin}

type principalKey struct{}

// NewContext carries p to the handlers of a request.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext is the principal a guard put into ctx.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
