package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/webjson"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

// issueListQuery is GET /api/issues's query, checked.
type issueListQuery struct {
	status string // "" (any but trashed), one of store.IssueStatuses, or store.IssueTrashed (?trash=1)
	words  []string
	after  int64
	limit  int
}

// readIssueListQuery checks the list's query; an error is the message
// of a 400.
func readIssueListQuery(r *http.Request) (issueListQuery, error) {
	q := r.URL.Query()
	out := issueListQuery{status: q.Get("status"), limit: 20}
	if out.status != "" && !slices.Contains(store.IssueStatuses, out.status) {
		return out, errors.New("status: one of " + strings.Join(store.IssueStatuses, ", "))
	}
	switch q.Get("trash") {
	case "":
	case "1":
		if out.status != "" {
			return out, errors.New("trash: the trash has no statuses; give trash=1 or status, not both")
		}
		out.status = store.IssueTrashed
	default:
		return out, errors.New("trash: 1 lists the trash")
	}
	var err error
	if out.words, err = issues.SearchWords(q.Get("q")); err != nil {
		return out, err
	}
	if v := q.Get("after"); v != "" {
		if out.after, err = strconv.ParseInt(v, 10, 64); err != nil || out.after < 0 {
			return out, errors.New("after: an issue id")
		}
	}
	if v := q.Get("limit"); v != "" {
		if out.limit, err = strconv.Atoi(v); err != nil || out.limit < 1 || out.limit > maxIssuePage {
			return out, fmt.Errorf("limit: 1 to %d", maxIssuePage)
		}
	}
	return out, nil
}

// listIssues handles GET /api/issues: a page of issues (?status=), of
// the trash (?trash=1), or those with every word of ?q= among the
// issues.SearchScan newest (no next page: a search answers at once).
func (s *Server) listIssues(w http.ResponseWriter, r *http.Request) {
	q, err := readIssueListQuery(r)
	if err != nil {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	var list []store.Issue
	switch {
	case len(q.words) > 0:
		if q.status == store.IssueTrashed {
			s.issues.PurgeTrash(r.Context())
		}
		list, err = s.issues.Search(r.Context(), q.status, q.words, q.limit)
	case q.status == store.IssueTrashed:
		list, err = s.issues.Trashed(r.Context(), q.after, q.limit)
	default:
		list, err = s.deps.Issues.ListIssues(r.Context(), q.status, q.after, q.limit)
	}
	if errors.Is(err, issues.ErrSearchBusy) {
		w.Header().Set("Retry-After", "1")
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
		return
	}
	if err != nil {
		s.storeFailed(w, "list issues", err)
		return
	}
	out := map[string]any{"issues": list}
	if len(list) == q.limit && len(q.words) == 0 {
		out["next"] = strconv.FormatInt(list[len(list)-1].ID, 10)
	}
	webjson.Write(w, http.StatusOK, out)
}

// deleteIssue handles DELETE /api/issues/{id}: 204, a draft, scheduled
// or sent issue moved to the trash (restorable for issues.TrashKept);
// 409 for any other status (cancel one instead) or a digest run's.
func (s *Server) deleteIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	_, err := s.issues.Trash(r.Context(), is)
	if errors.Is(err, issues.ErrDigestDraft) {
		webjson.Write(w, http.StatusConflict, errorBody(err.Error()))
		return
	}
	if err != nil {
		s.storeFailed(w, "move the issue to the trash", err)
		return
	}
	s.note(r, audit.IssueDeleted, audit.Issue(is.ID), is.Status+" → trash: "+is.Subject)
	w.WriteHeader(http.StatusNoContent)
}

// restoreIssue handles POST /api/issues/{id}/restore: the trashed issue
// back as it was (a scheduled one as a draft); 409 when it is not in the
// trash.
func (s *Server) restoreIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	back, err := s.issues.RestoreFromTrash(r.Context(), is)
	if err != nil {
		s.storeFailed(w, "restore the issue", err)
		return
	}
	s.note(r, audit.IssueUntrashed, audit.Issue(is.ID), "trash → "+back.Status)
	webjson.Write(w, http.StatusOK, back)
}
