package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// declareField is POST /admin/fields: a field declared, or a choice
// field's choices changed, by the store as POST /api/fields does (a
// field keeps its type). A bad name, type or choice: the form again with
// the store's reason (400), nothing changed.
func (h *Handler) declareField(w http.ResponseWriter, r *http.Request) {
	f, err := form.NewField(w, r)
	if err != nil {
		h.fields(w, r, form.Status(err), f, err.Error())
		return
	}
	d, err := h.d.Store.DefineField(r.Context(), f.Def())
	switch {
	case errors.Is(err, store.ErrBadField):
		h.fields(w, r, http.StatusBadRequest, f, "Not declared: "+err.Error()+".")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.FieldDeclared, "field:"+d.Name, string(d.Type))
	done(w, r, "/admin/fields", "field-saved")
}
