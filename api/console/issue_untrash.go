package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// untrashIssue is POST /admin/issues/{id}/restore: the Undo after a
// delete and the Trash view's Restore, as POST /api/issues/{id}/restore.
// The issue comes back as it was (a scheduled one as a draft, which the
// notice says); one not in the trash is 409, nothing changed.
func (h *Handler) untrashIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	if err := form.Empty(w, r); err != nil {
		h.errorPage(w, r, form.Status(err), "Not done", err.Error())
		return
	}
	back, err := h.issues.RestoreFromTrash(r.Context(), is)
	var state *store.StateError
	switch {
	case errors.As(err, &state):
		h.errorPage(w, r, http.StatusConflict, "Not restored", "The issue is "+state.Status+", not in the trash: there is nothing to restore. Nothing was changed.")
		return
	case errors.Is(err, store.ErrNoIssue):
		h.notFound(w, r, "issue")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.IssueUntrashed, audit.Issue(is.ID), "trash → "+back.Status)
	notice := "untrashed"
	if is.TrashedFrom == store.IssueScheduled {
		notice = "untrashed-draft"
	}
	done(w, r, "/admin/issues/"+itoa(is.ID), notice)
}
