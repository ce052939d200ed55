package console

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/store"
)

// previewIssue is POST /admin/issues/preview: what the editor holds,
// rendered, nothing saved. The Preview button (no script) gets the
// editor again with the preview; the editor's script asks for the
// mail's HTML alone (X-Preview: fragment) as the writer types.
func (h *Handler) previewIssue(w http.ResponseWriter, r *http.Request) {
	f, err := form.NewIssue(w, r)
	if err != nil {
		h.issueFailed(w, r, store.Issue{}, f, err)
		return
	}
	is := store.Issue{}
	if id, err := strconv.ParseInt(r.PostForm.Get("id"), 10, 64); err == nil && id > 0 {
		is, err = h.d.Store.Issue(r.Context(), id)
		if errors.Is(err, store.ErrNoIssue) {
			h.notFound(w, r, "issue")
			return
		}
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
	}
	if r.Header.Get("X-Preview") == "fragment" {
		html, problem := h.preview(r.Context(), is, f)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if problem != "" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			html = problem
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		}
		_, _ = w.Write([]byte(html)) // a client gone mid-body has nothing to hear
		return
	}
	h.editor(w, r, http.StatusOK, is, f, "")
}
