package console

import (
	"net/http"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// auditPage is how many entries a page lists.
const auditPage = 50

type auditData struct {
	Entries []audit.Entry
	Next    string
}

// listAudit is GET /admin/audit?after=: who did what to what, newest
// first, as GET /api/audit.
func (h *Handler) listAudit(w http.ResponseWriter, r *http.Request) {
	after := r.URL.Query().Get("after")
	if store.CheckAuditID(after) != nil {
		after = ""
	}
	list, err := h.d.AuditLog.AuditEntries(r.Context(), after, auditPage)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	d := auditData{Entries: list}
	if len(list) == auditPage {
		d.Next = list[len(list)-1].ID
	}
	h.render(w, r, http.StatusOK, "audit", page{Title: "Audit log", Section: "audit", Data: d})
}
