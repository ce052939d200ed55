package console

import (
	"net/http"

	"github.com/newsletter/newsletter/services/csvimport"
)

type importFormData struct {
	Columns   string
	MaxUpload int64
}

// showImport is GET /admin/import: the upload form.
func (h *Handler) showImport(w http.ResponseWriter, r *http.Request) {
	h.importForm(w, r, http.StatusOK, "")
}

func (h *Handler) importForm(w http.ResponseWriter, r *http.Request, code int, problem string) {
	h.render(w, r, code, "import", page{Title: "Import", Section: "import", Error: problem,
		Data: importFormData{Columns: csvimport.Columns, MaxUpload: h.cfg.MaxUpload >> 20}})
}
