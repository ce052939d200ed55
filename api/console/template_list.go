package console

import (
	"net/http"

	"github.com/newsletter/newsletter/services/catalog"
)

// mailTemplateRow is a template on the Mail templates screen.
type mailTemplateRow struct {
	catalog.TemplateJSON
	// Written: a step whose subject and Markdown body are written on the
	// Sequence page; they make its mail, not this template's text.
	Written bool
}

// listMailTemplates is GET /admin/templates: the built-in templates,
// then the sequence's steps, each saying whether a text of its own is
// stored (and its version) or the built-in one is in use.
func (h *Handler) listMailTemplates(w http.ResponseWriter, r *http.Request) {
	if h.catalogMissing(w, r) {
		return
	}
	snap := h.d.Catalog.Snapshot()
	var rows []mailTemplateRow
	for _, name := range catalog.TemplateNames(h.d.Templates, snap.Set) {
		t, _ := catalog.Template(h.d.Templates, snap, name)
		t.Text, t.HTML = "", ""
		rows = append(rows, mailTemplateRow{TemplateJSON: t, Written: writtenStep(snap.Set.Sequence.Steps, name)})
	}
	h.render(w, r, http.StatusOK, "mail_templates", page{Title: "Mail templates", Section: "templates", Data: rows})
}
