package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// createIssue is POST /admin/issues: the same check and store call as
// POST /api/issues.
func (h *Handler) createIssue(w http.ResponseWriter, r *http.Request) {
	f, err := form.NewIssue(w, r)
	if err == nil {
		err = h.checkSegment(r.Context(), f)
	}
	if err == nil {
		err = issues.CheckContent(h.cfg.Topics.Current(), f.Content())
	}
	if err != nil {
		h.issueFailed(w, r, store.Issue{}, f, err)
		return
	}
	is, err := h.d.Store.CreateIssue(r.Context(), f.Content(), "")
	if err != nil {
		h.issueFailed(w, r, store.Issue{}, f, err)
		return
	}
	h.record(r, audit.IssueCreated, audit.Issue(is.ID), is.Slug)
	done(w, r, "/admin/issues/"+itoa(is.ID), "created")
}
