package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/services/csvimport"
)

// showImportStatus is GET /admin/import/{job}: the progress bar and the
// rejected lines with their reasons; the JSON of it for the page's
// script (Accept: application/json), the same as GET /api/imports/{id}.
func (h *Handler) showImportStatus(w http.ResponseWriter, r *http.Request) {
	s, err := h.imports.Status(r.Context(), r.PathValue("job"))
	if errors.Is(err, csvimport.ErrNoJob) {
		h.notFound(w, r, "import")
		return
	}
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	if s.State == csvimport.StateMapping && !wantsJSON(r) {
		h.showImportMapping(w, r, s, http.StatusOK, "")
		return
	}
	if wantsJSON(r) {
		webjson.Write(w, http.StatusOK, s)
		return
	}
	refresh := 0
	if s.State == csvimport.StateRunning {
		refresh = 2
	}
	h.render(w, r, http.StatusOK, "import_status", page{Title: "Import " + s.File, Section: "import", Refresh: refresh, Data: importPage{s}})
}
