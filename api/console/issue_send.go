package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// sendIssue is POST /admin/issues/{id}/send: now, at a time, or at a
// local hour, through api.SendIssue as POST /api/issues/{id}/send.
func (h *Handler) sendIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	f, err := form.NewSend(w, r)
	var req api.SendRequest
	if err == nil {
		req, err = f.Request()
		if err != nil {
			h.editor(w, r, http.StatusBadRequest, is, formOf(is), err.Error())
			return
		}
	}
	if err == nil {
		is, err = api.SendIssue(r.Context(), h.d.Store, h.d.Jobs, h.d.Log, is.ID, req, h.d.Now())
	}
	if err != nil {
		h.issueFailed(w, r, is, formOf(is), err)
		return
	}
	h.record(r, audit.IssueSent, audit.Issue(is.ID), req.Detail())
	notice := "sending"
	if is.Status == store.IssueScheduled {
		notice = "scheduled"
	}
	done(w, r, "/admin/issues/"+itoa(is.ID), notice)
}
