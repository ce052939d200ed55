package console

import (
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// issuesPage is how many issues a page lists.
const issuesPage = 25

type issueListData struct {
	Issues   []store.Issue
	Status   string
	Statuses []string
	Next     int64
	// Trash: the page lists the trash (?trash=1), each with its Restore.
	Trash bool
	// Query is the search typed (?q=); Problem, why it was not run.
	Query, Problem string
	// Undo, after a delete (?undo=), is the issue the banner offers to
	// bring back.
	Undo int64
	// TrashDays is how long the trash keeps an issue.
	TrashDays int
}

// listIssues is GET /admin/issues?status=&after=, the trash with
// ?trash=1, a search with ?q= (the issues.SearchScan newest, one page).
func (h *Handler) listIssues(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := issueListData{Status: q.Get("status"), Statuses: store.IssueStatuses, Trash: q.Get("trash") == "1", Query: q.Get("q"), TrashDays: store.TrashDays}
	if d.Status != "" && !slices.Contains(store.IssueStatuses, d.Status) || d.Trash {
		d.Status = ""
	}
	status := d.Status
	if d.Trash {
		status = store.IssueTrashed
	}
	if id, err := strconv.ParseInt(q.Get("undo"), 10, 64); err == nil && id > 0 {
		d.Undo = id
	}
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	words, err := issues.SearchWords(d.Query)
	if err != nil {
		d.Problem, words = err.Error(), nil
	}
	switch {
	case len(words) > 0:
		if d.Trash {
			h.issues.PurgeTrash(r.Context())
		}
		d.Issues, err = h.issues.Search(r.Context(), status, words, issuesPage)
	case d.Trash:
		d.Issues, err = h.issues.Trashed(r.Context(), max(after, 0), issuesPage)
	default:
		d.Issues, err = h.d.Store.ListIssues(r.Context(), status, max(after, 0), issuesPage)
	}
	if errors.Is(err, issues.ErrSearchBusy) {
		w.Header().Set("Retry-After", "1")
		h.errorPage(w, r, http.StatusServiceUnavailable, "Search busy", err.Error())
		return
	}
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	if len(d.Issues) == issuesPage && len(words) == 0 {
		d.Next = d.Issues[len(d.Issues)-1].ID
	}
	title := "Issues"
	if d.Trash {
		title = "Trash"
	}
	h.render(w, r, http.StatusOK, "issues", page{Title: title, Section: "issues", Data: d})
}
