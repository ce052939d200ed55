package console

import (
	"fmt"
	"net/http"

	"github.com/newsletter/newsletter/services/catalog"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// saveMailTemplate is POST /admin/templates/{name}: its text and HTML
// over the version the page was read at (0: the built-in one), as PUT
// /api/templates/{name}. Every mail is rendered with it first: a
// template that does not parse or uses a field mails do not have shows
// the form again with the reason and what was typed, nothing saved.
func (h *Handler) saveMailTemplate(w http.ResponseWriter, r *http.Request) {
	if h.catalogMissing(w, r) {
		return
	}
	name := r.PathValue("name")
	if _, ok := catalog.Template(h.d.Templates, h.d.Catalog.Snapshot(), name); !ok {
		h.notFound(w, r, "template")
		return
	}
	f, err := form.NewTemplate(w, r)
	if err != nil {
		h.mailTemplatePage(w, r, form.Status(err), name, f, 0, err.Error())
		return
	}
	saved, err := h.d.Catalog.SaveTemplate(r.Context(), store.Template{Name: name, Text: f.Text, HTML: f.HTML}, f.Version, principalOf(r).Name)
	if err != nil {
		why := h.catalogRefusal(w, r, err, staleTemplate)
		if why == nil {
			return // the store failed: answered
		}
		if why.code == http.StatusConflict {
			f.Version = h.freshCatalog(r.Context()).Templates[name].Version
		}
		h.mailTemplatePage(w, r, why.code, name, f, 0, why.msg)
		return
	}
	h.record(r, audit.TemplateChanged, "template:"+name, fmt.Sprintf("version %d", saved.Templates[name].Version))
	done(w, r, "/admin/templates/"+name, "template-saved")
}
