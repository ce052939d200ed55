package console

import "net/http"

// downloadExport is GET /admin/exports/{id}/download: the export's CSV
// once done (api's WriteExportCSV: 202 while it runs, 404 once expired,
// after 24 hours).
func (h *Handler) downloadExport(w http.ResponseWriter, r *http.Request) {
	if h.d.List == nil {
		h.notFound(w, r, "export")
		return
	}
	h.d.List.WriteExportCSV(w, r, r.PathValue("id"))
}
