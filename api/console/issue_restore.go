package console

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// restoreIssueVersion is POST /admin/issues/{id}/versions/{n}/restore:
// version n's content saved as the newest version, as the API's route,
// when the issue is still at the version the page showed (409 otherwise,
// nothing changed).
func (h *Handler) restoreIssueVersion(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n <= 0 {
		h.notFound(w, r, "version")
		return
	}
	version, err := form.Version(w, r)
	if err != nil {
		h.errorPage(w, r, form.Status(err), "Not done", err.Error())
		return
	}
	out, err := h.issues.Restore(r.Context(), h.cfg.Topics.Current(), is, version, n)
	var bad *issues.InputError
	var state *store.StateError
	switch {
	case errors.Is(err, issues.ErrNoVersion):
		h.notFound(w, r, "version")
		return
	case errors.Is(err, store.ErrIssueStale):
		h.errorPage(w, r, http.StatusConflict, "Not restored", "The issue changed since you opened its versions; nothing was restored. Open them again and choose.")
		return
	case errors.As(err, &state):
		h.errorPage(w, r, http.StatusConflict, "Not restored", "The issue is "+state.Status+": only a draft or a scheduled issue can change. Nothing was changed.")
		return
	case errors.As(err, &bad):
		h.errorPage(w, r, http.StatusBadRequest, "Not restored", "That version cannot be saved as it is ("+bad.Msg+"). Nothing was changed.")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.IssueRestored, audit.Issue(out.ID), "version "+strconv.Itoa(n))
	done(w, r, "/admin/issues/"+itoa(out.ID), "version-restored")
}
