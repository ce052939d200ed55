package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api"
	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// saveIssue is POST /admin/issues/{id}: the same check and store call as
// PUT /api/issues/{id}; the previous content stays as a version.
func (h *Handler) saveIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	f, err := form.NewIssue(w, r)
	if err == nil && !store.Editable(is.Status) {
		err = store.ErrIssueState
	}
	if err == nil {
		err = api.CheckIssue(h.cfg.Topics, f.Content())
	}
	if err == nil {
		is, err = h.d.Store.UpdateIssue(r.Context(), is.ID, f.Content())
	}
	if err != nil {
		h.issueFailed(w, r, is, f, err)
		return
	}
	h.record(r, audit.IssueUpdated, audit.Issue(is.ID), "")
	done(w, r, "/admin/issues/"+itoa(is.ID), "saved")
}
