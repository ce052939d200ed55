package console

import (
	"net/http"

	"github.com/newsletter/newsletter/store"
)

// confirmCancelIssue is GET /admin/issues/{id}/cancel: the page that
// says what a cancel does and asks before it (the cancel itself is the
// POST, changeIssue). A cancel cannot be undone.
func (h *Handler) confirmCancelIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	lines := []string{"A cancelled issue stays cancelled: it cannot be sent, resumed or edited again (duplicate it to start over)."}
	switch is.Status {
	case store.IssueSending, store.IssuePaused:
		p, err := h.d.Store.IssueProgress(r.Context(), is.ID)
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		lines = append(lines, "It is "+is.Status+": "+groupDigits(p.Sent)+" of "+groupDigits(p.Planned)+
			" planned readers have it already and keep it; nobody else gets it.")
	case store.IssueScheduled:
		lines = append(lines, "It is scheduled: nobody gets it. To send it later instead, take it back to a draft.")
	}
	h.render(w, r, http.StatusOK, "confirm", page{Title: "Cancel " + is.Subject, Section: "issues", Data: confirmData{
		Heading: "Cancel “" + is.Subject + "”?", Lines: lines, Action: "/admin/issues/" + itoa(is.ID) + "/cancel",
		Button: "Cancel the issue", Danger: true, Back: "/admin/issues/" + itoa(is.ID)}})
}
