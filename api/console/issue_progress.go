package console

import (
	"net/http"

	"github.com/newsletter/newsletter/internal/webjson"
)

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
	webjson.Write(w, http.StatusOK, p)
}
