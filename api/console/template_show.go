package console

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/newsletter/newsletter/services/catalog"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
)

// templateVersionsShown is how many saved versions a template's page
// lists (the history keeps more, all kinds together).
const templateVersionsShown = 20

type mailTemplateData struct {
	Name string
	// Form is the text in effect (or a past version's, or what was typed
	// when a save was refused), at the version it saves over.
	Form                  form.Template
	Step, Stored, Written bool
	History               []store.CatalogChange
	// Showing is the past version loaded into the form (?version=N): a
	// save makes it the newest. 0: the text in effect.
	Showing int64
}

// showMailTemplate is GET /admin/templates/{name}: the template's text
// and HTML parts (the stored ones, else the built-in ones) in a form
// (read-only but for admins), and its last saved versions with who saved
// them and when; ?version=N puts that version's text in the form.
func (h *Handler) showMailTemplate(w http.ResponseWriter, r *http.Request) {
	if h.catalogMissing(w, r) {
		return
	}
	name := r.PathValue("name")
	t, ok := catalog.Template(h.d.Templates, h.d.Catalog.Snapshot(), name)
	if !ok {
		h.notFound(w, r, "template")
		return
	}
	f := form.Template{Version: t.Version, Text: t.Text, HTML: t.HTML}
	var showing int64
	if raw := r.URL.Query().Get("version"); raw != "" {
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || v < 1 {
			h.notFound(w, r, "version of this template")
			return
		}
		past, found, err := h.pastTemplate(r, name, v)
		switch {
		case err != nil:
			h.storeAway(w, r, err)
			return
		case !found:
			h.notFound(w, r, "version of this template (the history keeps the latest saves)")
			return
		}
		text, html, _ := h.d.Templates.Builtin(name)
		f.Text, f.HTML, showing = cmpOr(past.Text, text), cmpOr(past.HTML, html), v
	}
	h.mailTemplatePage(w, r, http.StatusOK, name, f, showing, "")
}

// pastTemplate is version v of template name from the history.
func (h *Handler) pastTemplate(r *http.Request, name string, v int64) (store.Template, bool, error) {
	hist, err := h.d.Catalog.History(r.Context(), "template:"+name, 1000)
	if err != nil {
		return store.Template{}, false, err
	}
	for _, c := range hist {
		if c.Version == v {
			var t store.Template
			err := json.Unmarshal(c.Content, &t)
			return t, err == nil, err
		}
	}
	return store.Template{}, false, nil
}

func (h *Handler) mailTemplatePage(w http.ResponseWriter, r *http.Request, code int, name string, f form.Template, showing int64, problem string) {
	hist, err := h.d.Catalog.History(r.Context(), "template:"+name, templateVersionsShown)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	for i := range hist {
		hist[i].Content = nil // the list shows who and when; ?version=N opens one
	}
	snap := h.d.Catalog.Snapshot()
	_, stored := snap.Templates[name]
	h.render(w, r, code, "mail_template", page{Title: "Template " + name, Section: "templates", Error: problem,
		Data: mailTemplateData{Name: name, Form: f, Step: slices.Contains(snap.Set.Templates(), name), Stored: stored,
			Written: writtenStep(snap.Set.Sequence.Steps, name), History: hist, Showing: showing}})
}

// writtenStep reports whether name is a step written on the Sequence
// page (a body of its own).
func writtenStep(steps []topics.Step, name string) bool {
	return slices.ContainsFunc(steps, func(st topics.Step) bool { return st.Template == name && st.Body != "" })
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
