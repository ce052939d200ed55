package console

import (
	"net/http"
	"slices"

	"github.com/newsletter/newsletter/store"
)

type versionsData struct {
	Issue    store.Issue
	Versions []store.IssueVersion // newest first
	Editable bool
	Max      int
}

// issueVersions is GET /admin/issues/{id}/versions: the kept previous
// contents, newest first, each with a restore button while the issue
// may change.
func (h *Handler) issueVersions(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	vs, err := h.issues.Versions(r.Context(), is)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	slices.Reverse(vs)
	h.render(w, r, http.StatusOK, "versions", page{Title: "Versions of " + is.Subject, Section: "issues",
		Data: versionsData{Issue: is, Versions: vs, Editable: store.Editable(is.Status), Max: store.MaxIssueVersions}})
}
