package console

import (
	"net/http"
	"strings"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/store"
)

// fieldsData is the Fields screen's: the declared fields, and the form
// that declares one (or changes a choice field's choices).
type fieldsData struct {
	Fields []store.FieldDef
	Form   form.Field
	Types  []store.FieldType
	Max    int
}

// ChoicesOf is a choice field's choices as the form's box shows them.
func (fieldsData) ChoicesOf(d store.FieldDef) string { return strings.Join(d.Choices, "\n") }

// listFields is GET /admin/fields: the declared custom fields, as GET
// /api/fields lists them (the same store), and the form that declares one.
func (h *Handler) listFields(w http.ResponseWriter, r *http.Request) {
	h.fields(w, r, http.StatusOK, form.Field{Type: string(store.FieldText)}, "")
}

// fields renders the Fields screen with f in the form, saying problem
// when there is one.
func (h *Handler) fields(w http.ResponseWriter, r *http.Request, code int, f form.Field, problem string) {
	defs, err := h.d.Store.FieldDefs(r.Context())
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.render(w, r, code, "fields", page{Title: "Fields", Section: "fields", Error: problem,
		Data: fieldsData{Fields: defs, Form: f, Types: store.FieldTypes, Max: store.MaxFields}})
}
