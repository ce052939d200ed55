package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
)

// saveIssue is POST /admin/issues/{id}: the same check and store call as
// PUT /api/issues/{id}; the previous content stays as a version.
func (h *Handler) saveIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	f, err := form.NewIssue(w, r)
	saved := is
	if err == nil {
		err = h.checkSegment(r.Context(), f)
	}
	if err == nil {
		saved, err = h.issues.UpdateSlug(r.Context(), h.cfg.Topics.Current(), is, f.Version, f.Content(), f.Slug)
	}
	if err != nil {
		h.issueFailed(w, r, is, f, err)
		return
	}
	detail := ""
	if saved.Slug != is.Slug {
		detail = "slug " + is.Slug + " → " + saved.Slug
	}
	h.record(r, audit.IssueUpdated, audit.Issue(saved.ID), detail)
	done(w, r, "/admin/issues/"+itoa(is.ID), "saved")
}
