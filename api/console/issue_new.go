package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/store"
)

// newIssue is GET /admin/issues/new: an empty editor, the default topics
// ticked.
func (h *Handler) newIssue(w http.ResponseWriter, r *http.Request) {
	h.editor(w, r, http.StatusOK, store.Issue{}, form.Issue{Topics: h.cfg.Topics.Current().Defaults()}, "")
}
