package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
)

// changeIssue is POST /admin/issues/{id}/pause, /resume and /cancel:
// api.ChangeIssue, as the API's routes of the same names.
func (h *Handler) changeIssue(action string) http.HandlerFunc {
	notice := map[string]string{"pause": "paused", "resume": "resumed", "cancel": "cancelled"}[action]
	return func(w http.ResponseWriter, r *http.Request) {
		is, ok := h.issueOf(w, r)
		if !ok {
			return
		}
		if err := form.Empty(w, r); err != nil {
			h.errorPage(w, r, http.StatusBadRequest, "Bad form", err.Error())
			return
		}
		changed, err := api.ChangeIssue(r.Context(), h.d.Store, h.d.Jobs, h.d.Log, is, action, h.d.Now())
		if err != nil {
			h.issueFailed(w, r, is, formOf(is), err)
			return
		}
		h.record(r, api.IssueActionAudit(action), audit.Issue(is.ID), is.Status+" → "+changed.Status)
		done(w, r, "/admin/issues/"+itoa(is.ID), notice)
	}
}
