package console

// Role is what a signed-in person may do: a viewer reads, an editor also
// writes issues and items, an admin does everything.
type Role string

// The roles, weakest first.
const (
	Viewer Role = "viewer"
	Editor Role = "editor"
	Admin  Role = "admin"
)

var roleRank = map[Role]int{Viewer: 1, Editor: 2, Admin: 3}

// Allows tells whether r may do what needs need.
func (r Role) Allows(need Role) bool { return roleRank[r] >= roleRank[need] && roleRank[need] > 0 }

// Principal is who a token signs in as.
type Principal struct {
	Name string
	Role Role
}
