package api

import (
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/issues"
)

// sendIssue handles POST /api/issues/{id}/send: {} now, {"at"} or
// {"local_time"}; "confirm_audience" refuses the send when the audience
// is no longer that number, "force" sends to 0 readers and an issue whose
// HTML part is over issues.ClipBytes (refused 409 otherwise), "version"
// refuses it when the content changed since; an error among the
// pre-send checks (GET .../checks) refuses it (409 {"error","checks"})
// unless "ignore_checks". 202 {"id","status", "audience","html_bytes",
// "overridden"}: overridden names the refusals overridden ("no readers",
// "size", "checks").
func (s *Server) sendIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	in := s.readAdminJSON(w, r, sendFields, true)
	if in == nil {
		return
	}
	when := issues.When{At: in.get("at"), LocalTime: in.get("local_time")}
	opt := issues.SendOptions{Force: in.get("force") == "true", IgnoreChecks: in.get("ignore_checks") == "true"}
	opt.Version, _ = strconv.Atoi(in.get("version"))
	if v := in.get("confirm_audience"); v != "" {
		n, _ := strconv.ParseInt(v, 10, 64)
		opt.ConfirmAudience = &n
	}
	is, rep, err := s.issues.SendReported(r.Context(), is, when, opt)
	if err != nil {
		s.storeFailed(w, "send the issue", err)
		return
	}
	s.note(r, audit.IssueSent, audit.Issue(is.ID), issues.SendDetail(when, rep))
	overridden := rep.Overridden
	if overridden == nil {
		overridden = []string{} // [] in the JSON, not null
	}
	webjson.Write(w, http.StatusAccepted, map[string]any{"id": is.ID, "status": is.Status, "audience": rep.Audience,
		"html_bytes": rep.HTMLBytes, "overridden": overridden})
}
