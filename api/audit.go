package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// maxAuditPage is the most entries GET /api/audit answers at once.
const maxAuditPage = 500

// note records a change this request made, by the principal the guard
// put into its context. It is called after the change succeeded; a
// failed write is logged whole and counted by the Trail (internal/audit
// says why the request still succeeds). Without a Trail (unit tests of
// other things) nothing is recorded.
func (s *Server) note(r *http.Request, action, target, detail string) {
	if s.deps.Audit == nil {
		return
	}
	_ = s.deps.Audit.Note(r.Context(), audit.Entry{Action: action, Target: target, Detail: detail}) // logged and counted by the Trail
}

// noteSubscriber records a change to the person with address email: the
// target is the address's keyed hash, never the address.
func (s *Server) noteSubscriber(r *http.Request, action, email, detail string) {
	if s.deps.Audit == nil {
		return
	}
	s.note(r, action, s.deps.Audit.Subscriber(email), detail)
}

func (s *Server) auditRoutes() {
	if s.deps.AuditLog == nil {
		return
	}
	s.mux.Handle("GET /api/audit", s.Admin(http.HandlerFunc(s.listAudit)))
}

// listAudit handles GET /api/audit?after=&limit=: entries newest first;
// "next" is the after of the following page, while there may be one.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, limit := q.Get("after"), 50
	if err := store.CheckAuditID(after); err != nil {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditPage {
			webjson.Write(w, http.StatusBadRequest, errorBody(fmt.Sprintf("limit: 1 to %d", maxAuditPage)))
			return
		}
		limit = n
	}
	list, err := s.deps.AuditLog.AuditEntries(r.Context(), after, limit)
	if errors.Is(err, store.ErrBadAuditID) {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	if err != nil {
		s.storeFailed(w, "read the audit log", err)
		return
	}
	if list == nil {
		list = []audit.Entry{}
	}
	out := map[string]any{"entries": list}
	if len(list) == limit {
		out["next"] = list[len(list)-1].ID
	}
	webjson.Write(w, http.StatusOK, out)
}
