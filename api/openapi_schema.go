package api

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

// schemaMap is a JSON Schema written by hand (a response the handler
// builds as a map); any other value in an apiOp is a Go value whose type
// the schema is reflected from, so the document says what the handler's
// own types marshal to.
type schemaMap = map[string]any

// schemaSet reflects Go types into JSON Schemas (OpenAPI 3.1's dialect,
// JSON Schema 2020-12), keeping each named struct once in components.
type schemaSet struct {
	named map[string]any          // component name → schema
	names map[reflect.Type]string // struct type → its component name
	// request: reflecting a request body, whose fields a client may
	// leave out (the handler says which it needs), so a struct first
	// seen there requires none; one an answer holds too is reflected
	// first by that answer (operation builds the answers first).
	request bool
}

func newSchemaSet() *schemaSet {
	return &schemaSet{named: map[string]any{}, names: map[reflect.Type]string{}}
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	durationType      = reflect.TypeFor[time.Duration]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	rawMessageType    = reflect.TypeFor[json.RawMessage]()
)

// of is the schema of v: v itself when it is a schemaMap, else its type's.
func (s *schemaSet) of(v any) any {
	if m, ok := v.(schemaMap); ok {
		return s.resolve(m)
	}
	if f, ok := v.(fields); ok {
		return f.schema()
	}
	return s.typ(reflect.TypeOf(v))
}

// resolve reflects the Go values a hand-written schema holds (under
// "properties" and "items"), so that a map's schema can name the types
// of its entries.
func (s *schemaSet) resolve(m schemaMap) schemaMap {
	out := schemaMap{}
	for k, v := range m {
		switch k {
		case "properties":
			props := schemaMap{}
			for name, p := range v.(schemaMap) {
				props[name] = s.of(p)
			}
			out[k] = props
		case "items":
			out[k] = s.of(v)
		default:
			out[k] = v
		}
	}
	return out
}

func nullable(schema schemaMap) schemaMap {
	if t, ok := schema["type"].(string); ok {
		schema["type"] = []string{t, "null"}
		return schema
	}
	return schemaMap{"anyOf": []any{schema, schemaMap{"type": "null"}}}
}

// typ is t's schema as encoding/json writes a value of it.
func (s *schemaSet) typ(t reflect.Type) schemaMap {
	switch {
	case t == timeType:
		return schemaMap{"type": "string", "format": "date-time"}
	case t == durationType:
		return schemaMap{"type": "integer", "description": "nanoseconds"}
	case t == rawMessageType:
		return schemaMap{}
	case t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType):
		return schemaMap{} // its own encoding: any JSON value
	case t.Kind() != reflect.Pointer && (t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType)):
		return schemaMap{"type": "string"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(s.typ(t.Elem()))
	case reflect.Bool:
		return schemaMap{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return schemaMap{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return schemaMap{"type": "number"}
	case reflect.String:
		return schemaMap{"type": "string"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return schemaMap{"type": []string{"string", "null"}, "contentEncoding": "base64"}
		}
		return schemaMap{"type": []string{"array", "null"}, "items": s.typ(t.Elem())}
	case reflect.Array:
		return schemaMap{"type": "array", "items": s.typ(t.Elem())}
	case reflect.Map:
		return schemaMap{"type": []string{"object", "null"}, "additionalProperties": s.typ(t.Elem())}
	case reflect.Struct:
		return s.structRef(t)
	}
	return schemaMap{} // an interface: any JSON value
}

// structRef is a reference to t's component, made on first sight (before
// its fields, so a type that holds itself ends).
func (s *schemaSet) structRef(t reflect.Type) schemaMap {
	if t.Name() == "" {
		return s.structSchema(t)
	}
	name, seen := s.names[t]
	if !seen {
		name = exportedName(t.Name())
		if _, taken := s.named[name]; taken {
			name = exportedName(pkgBase(t.PkgPath())) + name
		}
		s.names[t] = name
		s.named[name] = schemaMap{}
		s.named[name] = s.structSchema(t)
	}
	return schemaMap{"$ref": "#/components/schemas/" + name}
}

// structSchema is an object of t's JSON fields, the ones encoding/json
// always writes required; embedded structs' fields are t's own.
func (s *schemaSet) structSchema(t reflect.Type) schemaMap {
	props, required := schemaMap{}, []string{}
	s.addFields(t, props, &required)
	out := schemaMap{"type": "object", "properties": props}
	if len(required) > 0 && !s.request {
		out["required"] = required
	}
	return out
}

func (s *schemaSet) addFields(t reflect.Type, props schemaMap, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				s.addFields(ft, props, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		schema := s.typ(ft)
		if strings.Contains(","+opts+",", ",string,") {
			schema = schemaMap{"type": "string"}
		}
		props[name] = schema
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			*required = append(*required, name)
		}
	}
}

// exportedName is a component name of a Go type's name: capitalised,
// and a generic's brackets and commas made underscores (a component's
// name is letters, digits, ".", "-" and "_").
func exportedName(n string) string {
	if n == "" {
		return n
	}
	n = strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return r
		}
		return '_'
	}, n)
	return strings.ToUpper(n[:1]) + n[1:]
}

func pkgBase(path string) string { return path[strings.LastIndex(path, "/")+1:] }

// schema is the JSON object a route with these fields reads: the fields
// readInput takes, none other (it refuses an unknown one), none required
// here (the handler says which it needs).
func (f fields) schema() schemaMap {
	props := schemaMap{}
	for name, t := range f {
		switch t {
		case textField:
			props[name] = schemaMap{"type": "string"}
		case listField:
			props[name] = schemaMap{"type": "array", "items": schemaMap{"type": "string"}}
		case objectField:
			props[name] = schemaMap{"type": []string{"object", "string"}}
		case countField:
			props[name] = schemaMap{"type": "integer", "minimum": 0}
		case flagField:
			props[name] = schemaMap{"type": "boolean"}
		case valueListField:
			props[name] = schemaMap{"type": "array", "items": schemaMap{"type": []string{"string", "number"}}}
		}
	}
	return schemaMap{"type": "object", "properties": props, "additionalProperties": false}
}
