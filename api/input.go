package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	"github.com/newsletter/newsletter/internal/httpbody"
)

// Every body the API reads goes through readInput with the fields its
// route documents: a JSON object must hold exactly those fields, each of
// its type (a string, or a list of strings), or the request is a 400 that
// names the field. A list where a string belongs is not "the first
// element", a number is not a string, null is not absent, a field twice
// is not the last one: whatever else a client meant, we cannot know it.

// fieldType is what one field of a body holds.
type fieldType int

const (
	textField fieldType = iota // one string
	listField                  // a list of strings (in a form: the field repeated)
	// objectField is a JSON object, kept as its JSON text: in a JSON
	// body the object itself or its JSON as a string, in a form the
	// JSON text.
	objectField
	// countField is a whole number of at least 0, kept as its decimal
	// text (in a form, that text).
	countField
	// flagField is true or false, kept as "true" or "false".
	flagField
	// valueListField is a list of values of custom fields: strings or
	// numbers, a number kept as its JSON text ([1, 2.5] is "1", "2.5"),
	// as a person's field values are (subscribers.FieldValues).
	valueListField
)

// fields are a route's body: each field's name and type.
type fields map[string]fieldType

// The bodies of the routes, as the reference documents them.
var (
	subscribeFields = fields{"email": textField, "name": textField, "timezone": textField, "topics": listField,
		// the form's: topics_shown says the boxes were shown; website is
		// the honeypot
		"topics_shown": textField, "website": textField}
	unsubscribeFields = fields{"email": textField, "token": textField,
		// RFC 8058's one-click body
		"List-Unsubscribe": textField}
	confirmFields     = fields{"token": textField}
	eraseFields       = fields{"token": textField, "confirm": textField}
	preferencesFields = fields{"token": textField, "name": textField, "timezone": textField, "topics": listField, "leave": textField,
		// the channels under each topic (channels.go)
		"channels": listField, "channels_shown": textField}
	phoneFormFields = fields{"token": textField, "phone": textField, "remove": textField}
	phoneCodeFields = fields{"token": textField, "code": textField}
	itemFields      = fields{"title": textField, "url": textField, "summary": textField}
	eventFields     = fields{"email": textField, "topic": textField, "title": textField, "url": textField, "channels": listField,
		// the inbox's: a Markdown body, and the e-mail held until unread
		"body": textField, "email_if_unread_after": textField}
	digestRunFields = fields{"period": textField}
	bounceFields    = fields{"email": textField, "type": textField, "reason": textField, "id": textField}
	pushFields      = fields{"token": textField, "subscription": objectField}
)

// withField is f and one more field.
func withField(f fields, name string, t fieldType) fields {
	out := make(fields, len(f)+1)
	for k, v := range f {
		out[k] = v
	}
	out[name] = t
	return out
}

var errTooLarge = httpbody.ErrTooLarge

// input is a request body's fields: a form's repeated field, or a JSON
// list of strings, has several values.
type input map[string][]string

// get is a field's (first) value, "" when absent.
func (in input) get(k string) string {
	if v := in[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// readInput reads a JSON or form body (urlencoded or multipart), by the
// request's Content-Type, or as JSON whatever it says when onlyJSON is set
// (the admin API), keeping to want (decodeJSON; a form's fields that want
// does not name are ignored, a text field given twice is refused). The
// body is capped at MaxBody (httpbody.Limit: a declared length over it is
// refused before anything is read).
func (s *Server) readInput(w http.ResponseWriter, r *http.Request, want fields, onlyJSON bool) (input, error) {
	if err := httpbody.Limit(w, r, s.cfg.MaxBody); err != nil {
		return nil, errTooLarge
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if onlyJSON {
		ct = "application/json"
	}
	var in input
	var err error
	switch ct {
	case "application/json":
		in, err = decodeJSON(r.Body, want)
	case "multipart/form-data":
		var done func()
		done, err = httpbody.ParseMultipartForm(r, s.cfg.MaxBody)
		if err == nil {
			in, err = formInput(r.MultipartForm.Value, want)
		}
		done() // only the values are read
	default:
		var body []byte
		if body, err = io.ReadAll(r.Body); err == nil {
			var vals url.Values
			if vals, err = url.ParseQuery(string(body)); err == nil {
				in, err = formInput(vals, want)
			}
		}
	}
	if httpbody.IsTooLarge(err) {
		return nil, errTooLarge
	}
	var fe fieldError
	if errors.As(err, &fe) {
		return nil, fe
	}
	if err != nil {
		return nil, errors.New("unreadable body")
	}
	return in, nil
}

// fieldError is a body that is readable but not what the route takes; its
// text is the answer.
type fieldError string

func (e fieldError) Error() string { return string(e) }

// decodeJSON reads one JSON object whose fields are those of want, each of
// its type, every field at most once, and nothing after the object.
func decodeJSON(r io.Reader, want fields) (input, error) {
	dec := json.NewDecoder(r)
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fieldError("the body must be a JSON object")
	}
	out := input{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		typ, known := want[name]
		if !known {
			return nil, fieldError(fmt.Sprintf("unknown field %q", name))
		}
		if _, twice := out[name]; twice {
			return nil, fieldError(fmt.Sprintf("field %q is given twice", name))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if out[name], err = typed(name, typ, bytes.TrimSpace(raw)); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fieldError("the body must be one JSON object and nothing after it")
	}
	return out, nil
}

// typed reads one JSON value of a field of type typ.
func typed(name string, typ fieldType, raw []byte) ([]string, error) {
	str := func(v []byte) (string, bool) {
		var s string
		return s, len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil
	}
	if typ == textField {
		v, ok := str(raw)
		if !ok {
			return nil, fieldError(fmt.Sprintf("field %q must be a string", name))
		}
		return []string{v}, nil
	}
	if typ == countField {
		n, err := strconv.ParseUint(string(raw), 10, 53)
		if err != nil {
			return nil, fieldError(fmt.Sprintf("field %q must be a whole number", name))
		}
		return []string{strconv.FormatUint(n, 10)}, nil
	}
	if typ == flagField {
		if v := string(raw); v == "true" || v == "false" {
			return []string{v}, nil
		}
		return nil, fieldError(fmt.Sprintf("field %q must be true or false", name))
	}
	if typ == objectField {
		if v, ok := str(raw); ok {
			return []string{v}, nil
		}
		if len(raw) == 0 || raw[0] != '{' {
			return nil, fieldError(fmt.Sprintf("field %q must be a JSON object", name))
		}
		return []string{string(raw)}, nil
	}
	var elems []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &elems) != nil {
		return nil, fieldError(fmt.Sprintf("field %q must be a list of strings", name))
	}
	list := make([]string, 0, len(elems))
	for _, e := range elems {
		e = bytes.TrimSpace(e)
		v, ok := str(e)
		if !ok && typ == valueListField {
			v, ok = numberText(e)
		}
		if !ok && typ == valueListField {
			return nil, fieldError(fmt.Sprintf("field %q must be a list of strings or numbers", name))
		}
		if !ok {
			return nil, fieldError(fmt.Sprintf("field %q must be a list of strings", name))
		}
		list = append(list, v)
	}
	return list, nil
}

// numberText is a JSON number's text, as given.
func numberText(v []byte) (string, bool) {
	var n json.Number
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) || json.Unmarshal(v, &n) != nil {
		return "", false
	}
	return n.String(), true
}

// formInput keeps a form's fields that want names; a text field may be
// given once.
func formInput(vals url.Values, want fields) (input, error) {
	out := input{}
	for name, typ := range want {
		v, ok := vals[name]
		if !ok {
			continue
		}
		if typ != listField && typ != valueListField && len(v) > 1 {
			return nil, fieldError(fmt.Sprintf("field %q is given more than once", name))
		}
		out[name] = v
	}
	return out, nil
}

// readForm is readInput for the public forms: it answers a body it cannot
// read itself (413, 400) and returns false then.
func (s *Server) readForm(w http.ResponseWriter, r *http.Request, want fields) (input, bool) {
	in, err := s.readInput(w, r, want, false)
	if errors.Is(err, errTooLarge) {
		fail(w, r, http.StatusRequestEntityTooLarge, err.Error())
		return nil, false
	}
	if err != nil {
		fail(w, r, http.StatusBadRequest, err.Error())
		return nil, false
	}
	return in, true
}
