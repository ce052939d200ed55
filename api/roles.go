package api

import (
	"net/http"

	"github.com/newsletter/newsletter/internal/adminauth"
)

// Every guarded route is registered as s.Viewer(h), s.Editor(h) or
// s.Admin(h) (or s.Require(role, h)); the role of each route is the one
// next to its pattern in the file that registers it, and docs/reference.md
// lists them. The role matrix test (roles_test.go) walks every route the
// mux holds, so a route added without a role, or with another role than
// the table there says, fails it.

// Require guards h: a Bearer token whose role allows need (adminauth).
func (s *Server) Require(need adminauth.Role, h http.Handler) http.Handler {
	return s.deps.Guard.Require(need, h)
}

// Viewer guards a route that reads.
func (s *Server) Viewer(h http.Handler) http.Handler { return s.Require(adminauth.Viewer, h) }

// Editor guards a route that writes issues or items, previews or
// test-sends.
func (s *Server) Editor(h http.Handler) http.Handler { return s.Require(adminauth.Editor, h) }

// Admin guards every other route: suppressions, erasure, exports,
// tokens, digest runs, webhooks, the audit log.
func (s *Server) Admin(h http.Handler) http.Handler { return s.Require(adminauth.Admin, h) }

// Route is a pattern on the API's mux and the role it needs ("" for a
// public route).
type Route struct {
	Pattern string
	Role    adminauth.Role
}

// Routes lists every route registered so far, in order.
func (s *Server) Routes() []Route { return append([]Route(nil), s.mux.routes...) }

// routeMux is a ServeMux that remembers what was registered on it and
// with which role (from an *adminauth.Guarded handler).
type routeMux struct {
	*http.ServeMux
	routes []Route
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

// Handle implements the ServeMux method, recording the route.
func (m *routeMux) Handle(pattern string, h http.Handler) {
	var role adminauth.Role
	if g, ok := h.(interface{ Need() adminauth.Role }); ok {
		role = g.Need()
	}
	m.routes = append(m.routes, Route{Pattern: pattern, Role: role})
	m.ServeMux.Handle(pattern, h)
}

// HandleFunc implements the ServeMux method, recording the route.
func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}
