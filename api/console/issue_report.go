package console

import (
	"fmt"
	"net/http"

	"github.com/newsletter/newsletter/services/issues"
)

// issueReportCSV is GET /admin/issues/{id}/report.csv: the report's links
// and totals, as GET /api/issues/{id}/report?format=csv gives them.
func (h *Handler) issueReportCSV(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	rep, err := issues.BuildReport(r.Context(), h.d.Store, h.d.Engagement, is)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="issue-%d-report.csv"`, is.ID))
	if err := issues.WriteReportCSV(w, rep); err != nil {
		// The status is out already: the reader sees a cut file.
		h.d.Log.Warn("console: write an issue's report", "issue", is.ID, "err", err)
	}
}
