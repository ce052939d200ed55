package form

import (
	"net/http"
	"strings"

	"github.com/newsletter/newsletter/store"
)

// Field is the Fields screen's form: a field's name, its type and, for a
// choice field, its choices one a line (the store checks them all).
type Field struct {
	Name, Type string
	// Choices is the choices box as typed, one a line.
	Choices string
}

// Def is the declaration the form asks for: blank lines of the choices
// dropped, each trimmed.
func (f Field) Def() store.FieldDef {
	d := store.FieldDef{Name: f.Name, Type: store.FieldType(f.Type)}
	for _, c := range strings.Split(f.Choices, "\n") {
		if c = strings.TrimSpace(c); c != "" {
			d.Choices = append(d.Choices, c)
		}
	}
	return d
}

// NewField reads the field form.
func NewField(w http.ResponseWriter, r *http.Request) (Field, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Field{}, err
	}
	return Field{Name: value(r, "name"), Type: value(r, "type"), Choices: value(r, "choices")}, nil
}
