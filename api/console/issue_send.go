package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// sendIssue is POST /admin/issues/{id}/send: now, at a time, or at a
// local hour, through the issues service as POST /api/issues/{id}/send,
// with the audience the page showed (typed by the publisher above the
// threshold) and the version it showed.
func (h *Handler) sendIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	f, err := form.NewSend(w, r)
	if err != nil {
		h.editor(w, r, form.Status(err), is, formOf(is), err.Error())
		return
	}
	when, err := f.Schedule()
	var opt issues.SendOptions
	if err == nil {
		opt, err = f.Options()
	}
	if err != nil {
		h.editor(w, r, http.StatusBadRequest, is, formOf(is), err.Error())
		return
	}
	sent, rep, err := h.issues.SendReported(r.Context(), is, when, opt)
	if err != nil {
		h.issueFailed(w, r, is, formOf(is), err)
		return
	}
	h.record(r, audit.IssueSent, audit.Issue(is.ID), issues.SendDetail(when, rep))
	notice := "sending"
	if sent.Status == store.IssueScheduled {
		notice = "scheduled"
	}
	done(w, r, "/admin/issues/"+itoa(is.ID), notice)
}
