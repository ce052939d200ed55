package console

import "github.com/newsletter/newsletter/internal/adminauth"

// The roles and principals are the API's (adminauth), so a token means
// the same in the console as on /api/.
type (
	Role      = adminauth.Role
	Principal = adminauth.Principal
)

// The roles, weakest first.
const (
	Viewer = adminauth.Viewer
	Editor = adminauth.Editor
	Admin  = adminauth.Admin
)
