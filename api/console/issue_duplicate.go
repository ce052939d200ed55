package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
)

// duplicateIssue is POST /admin/issues/{id}/duplicate: a new draft with
// the issue's content, as POST /api/issues/{id}/duplicate; the editor
// opens on it.
func (h *Handler) duplicateIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	if err := form.Empty(w, r); err != nil {
		h.errorPage(w, r, form.Status(err), "Not done", err.Error())
		return
	}
	c, err := h.issues.Duplicate(r.Context(), is)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.IssueDuplicated, audit.Issue(c.ID), "copy of "+audit.Issue(is.ID))
	done(w, r, "/admin/issues/"+itoa(c.ID), "duplicated")
}
