package console

import "net/http"

// issueProgress is GET /admin/issues/{id}/progress: the counts of GET
// /api/issues/{id}/progress, for the page's script to poll.
func (h *Handler) issueProgress(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	p, err := h.d.Store.IssueProgress(r.Context(), is.ID)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}
