package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/issues"
)

// changeIssue is POST /admin/issues/{id}/pause, /resume, /reschedule,
// /unschedule and /cancel: issues.Change, as the API's routes of the
// same names.
func (h *Handler) changeIssue(action string) http.HandlerFunc {
	notice := map[string]string{"pause": "paused", "resume": "resumed", "cancel": "cancelled",
		"reschedule": "rescheduled", "unschedule": "unscheduled"}[action]
	return func(w http.ResponseWriter, r *http.Request) {
		is, ok := h.issueOf(w, r)
		if !ok {
			return
		}
		var when issues.When
		if action == "reschedule" {
			f, err := form.NewSend(w, r)
			if err == nil {
				when, err = f.Schedule()
			}
			if err != nil {
				h.editor(w, r, form.Status(err), is, formOf(is), err.Error())
				return
			}
		} else if err := form.Empty(w, r); err != nil {
			h.errorPage(w, r, form.Status(err), "Bad form", err.Error())
			return
		}
		changed, err := issues.Change(r.Context(), h.issues, is, action, when)
		if err != nil {
			h.issueFailed(w, r, is, formOf(is), err)
			return
		}
		detail := is.Status + " → " + changed.Status
		if action == "reschedule" {
			detail += ", " + when.Detail()
		}
		h.record(r, issues.ActionAudit(action), audit.Issue(is.ID), detail)
		done(w, r, "/admin/issues/"+itoa(is.ID), notice)
	}
}
