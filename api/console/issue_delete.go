package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// confirmDeleteIssue is GET /admin/issues/{id}/delete: the page that
// says what a delete does and asks before it (the issue page links
// here; the delete itself is the POST).
func (h *Handler) confirmDeleteIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	lines := []string{"It goes to the trash, where it is kept " + itoa(store.TrashDays) + " days: restore it from there (or undo right after) and it comes back as it was."}
	switch is.Status {
	case store.IssueScheduled:
		lines = append(lines, "It is scheduled: it will not be sent, and a restore brings it back as a draft, to be scheduled again.")
	case store.IssueSent:
		lines = append(lines, "It was sent: it leaves the archive until it is restored; the mails already delivered stay delivered.")
	}
	h.render(w, r, http.StatusOK, "confirm", page{Title: "Delete " + is.Subject, Section: "issues", Data: confirmData{
		Heading: "Move “" + is.Subject + "” to the trash?", Lines: lines, Action: "/admin/issues/" + itoa(is.ID) + "/delete",
		Button: "Move to trash", Danger: true, Back: "/admin/issues/" + itoa(is.ID)}})
}

// deleteIssue is POST /admin/issues/{id}/delete: a draft, scheduled or
// sent issue moved to the trash, as DELETE /api/issues/{id}; the list it
// leads to offers to undo it. Any other status is 409 (cancel it).
func (h *Handler) deleteIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	if err := form.Empty(w, r); err != nil {
		h.errorPage(w, r, form.Status(err), "Not done", err.Error())
		return
	}
	_, err := h.issues.Trash(r.Context(), is)
	var state *store.StateError
	switch {
	case errors.Is(err, issues.ErrDigestDraft):
		h.errorPage(w, r, http.StatusConflict, "Not deleted", "This is a digest run's issue: cancel it instead. Nothing was changed.")
		return
	case errors.As(err, &state):
		h.errorPage(w, r, http.StatusConflict, "Not deleted", "The issue is "+state.Status+": only a draft, a scheduled or a sent issue goes to the trash (cancel it instead). Nothing was changed.")
		return
	case errors.Is(err, store.ErrNoIssue):
		h.notFound(w, r, "issue")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.IssueDeleted, audit.Issue(is.ID), is.Status+" → trash: "+is.Subject)
	done(w, r, "/admin/issues?undo="+itoa(is.ID), "trashed")
}
