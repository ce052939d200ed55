package api

import (
	"context"
	"net/http"

	"github.com/newsletter/newsletter/internal/webjson"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/presend"
)

// ownChecker is the pre-send checks of a server given none: the
// renderer's mail and the settings' postal address, no link asked (a
// test's server, or one whose binary gave it no link checker). nil
// without a renderer: nothing to check.
func (s *Server) ownChecker() *issues.Checker {
	if s.deps.IssueRenderer == nil {
		return nil
	}
	return &issues.Checker{Renderer: s.deps.IssueRenderer, Checks: &presend.Checker{},
		PostalAddress: func(ctx context.Context) string { return s.deps.Settings.Current(ctx).PostalAddress }}
}

// issueChecks handles GET /api/issues/{id}/checks: the issue's pre-send
// checks as a send would run them, {"checks":[{"check","level","message",
// "fix"}]}, level error, warning or ok. Bounded by the link checker's
// bounds (presend.MaxLinks, Parallel, LinkTimeout, LinksBudget).
func (s *Server) issueChecks(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	if s.checker == nil {
		webjson.Write(w, http.StatusNotImplemented, errorBody("no checks here: this process has no mail templates"))
		return
	}
	rs, err := s.checker.Run(r.Context(), is)
	if err != nil {
		s.deps.Log.Error("check issue", "issue", is.ID, "err", err)
		webjson.Write(w, http.StatusInternalServerError, errorBody("could not render the issue: "+err.Error()))
		return
	}
	if rs == nil {
		rs = []presend.Result{}
	}
	webjson.Write(w, http.StatusOK, map[string]any{"checks": rs})
}
