package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// deleteIssue is POST /admin/issues/{id}/delete: a draft removed for
// good, as DELETE /api/issues/{id}; any other status is 409 (cancel it).
func (h *Handler) deleteIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	if err := form.Empty(w, r); err != nil {
		h.errorPage(w, r, form.Status(err), "Not done", err.Error())
		return
	}
	err := h.issues.Delete(r.Context(), is)
	var state *store.StateError
	switch {
	case errors.Is(err, issues.ErrDigestDraft):
		h.errorPage(w, r, http.StatusConflict, "Not deleted", "This draft is a digest run's issue: cancel it instead. Nothing was changed.")
		return
	case errors.As(err, &state):
		h.errorPage(w, r, http.StatusConflict, "Not deleted", "The issue is "+state.Status+": only a draft can be deleted (cancel it instead). Nothing was changed.")
		return
	case errors.Is(err, store.ErrNoIssue):
		h.notFound(w, r, "issue")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.IssueDeleted, audit.Issue(is.ID), is.Subject)
	done(w, r, "/admin/issues", "deleted")
}
