package console

import "net/http"

// showIssue is GET /admin/issues/{id}: the editor while the issue may
// change, its progress from sending on.
func (h *Handler) showIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	h.editor(w, r, http.StatusOK, is, formOf(is), "")
}
