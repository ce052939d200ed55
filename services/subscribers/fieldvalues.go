package subscribers

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// FieldValues are a person's custom field values as a body gives them:
// name → value. A value is a JSON string, or a JSON number (kept as its
// text, so that {"seats": 5} reads as a client of a number field means
// it; the field's type then checks it, as it checks a string: a number
// is no date), or null ("", which clears the field, as before). Anything
// else is refused with the field's name: true is no field value we could
// store without guessing.
type FieldValues map[string]string

// UnmarshalJSON implements json.Unmarshaler.
func (f *FieldValues) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("fields: an object of field names and values")
	}
	if raw == nil { // "fields": null: none given
		*f = nil
		return nil
	}
	out := make(FieldValues, len(raw))
	for name, v := range raw {
		v = bytes.TrimSpace(v)
		var s string
		switch {
		case len(v) > 0 && v[0] == '"':
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("fields: %q: unreadable string", name)
			}
		case string(v) == "null":
		case len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9'):
			var n json.Number
			if err := json.Unmarshal(v, &n); err != nil {
				return fmt.Errorf("fields: %q: unreadable number", name)
			}
			s = n.String()
		default:
			return fmt.Errorf("fields: %q: a value is a string or a number", name)
		}
		out[name] = s
	}
	*f = out
	return nil
}
