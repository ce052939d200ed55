package console

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/newsletter/newsletter/store"
)

// issuesPage is how many issues a page lists.
const issuesPage = 25

type issueListData struct {
	Issues   []store.Issue
	Status   string
	Statuses []string
	Next     int64
}

// listIssues is GET /admin/issues?status=&after=.
func (h *Handler) listIssues(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !slices.Contains(store.IssueStatuses, status) {
		status = ""
	}
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	list, err := h.d.Store.ListIssues(r.Context(), status, max(after, 0), issuesPage)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	d := issueListData{Issues: list, Status: status, Statuses: store.IssueStatuses}
	if len(list) == issuesPage {
		d.Next = list[len(list)-1].ID
	}
	h.render(w, r, http.StatusOK, "issues", page{Title: "Issues", Section: "issues", Data: d})
}
