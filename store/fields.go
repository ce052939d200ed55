package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// Custom fields: the publisher declares a field (its name and type), and
// each person may have a value of it, checked against the declaration
// when written. The values are kept beside the record (packed as the
// records are); a segment reads them only for the people its bitmaps
// leave in doubt.

// FieldType is what a field's values are.
type FieldType string

// The field types.
const (
	FieldText   FieldType = "text"   // any one line
	FieldNumber FieldType = "number" // a decimal number
	FieldDate   FieldType = "date"   // YYYY-MM-DD
	FieldChoice FieldType = "choice" // one of the declared choices
)

// FieldTypes lists the types, in the order the reference gives them.
var FieldTypes = []FieldType{FieldText, FieldNumber, FieldDate, FieldChoice}

// FieldDef is a declared field.
type FieldDef struct {
	Name string    `json:"name"`
	Type FieldType `json:"type"`
	// Choices are a choice field's values (none for the other types).
	Choices []string `json:"choices,omitempty"`
}

// Bounds of the fields.
const (
	MaxFieldNameLength  = 40
	MaxFieldValueLength = 500
	MaxFields           = 100
	MaxFieldChoices     = 100
)

var fieldName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// ErrBadField: a declaration or a value the store refuses; nothing
// changed. The error says which and why.
var ErrBadField = errors.New("bad field")

// Check tells a valid declaration. A name starts with a letter, so a
// template can name it (.Subscriber.Fields.company).
func (d FieldDef) Check() error {
	if len(d.Name) == 0 || len(d.Name) > MaxFieldNameLength || !fieldName.MatchString(d.Name) {
		return fmt.Errorf("%w: name %q: 1 to %d of a-z, 0-9 and _, starting with a letter", ErrBadField, d.Name, MaxFieldNameLength)
	}
	if !slices.Contains(FieldTypes, d.Type) {
		return fmt.Errorf("%w %s: type %q: one of text, number, date, choice", ErrBadField, d.Name, d.Type)
	}
	if d.Type != FieldChoice {
		if len(d.Choices) > 0 {
			return fmt.Errorf("%w %s: only a choice field has choices", ErrBadField, d.Name)
		}
		return nil
	}
	if len(d.Choices) == 0 || len(d.Choices) > MaxFieldChoices {
		return fmt.Errorf("%w %s: a choice field has 1 to %d choices", ErrBadField, d.Name, MaxFieldChoices)
	}
	for i, c := range d.Choices {
		if err := checkText(c); err != nil || c == "" {
			return fmt.Errorf("%w %s: choice %q: one non-empty line of at most %d bytes", ErrBadField, d.Name, c, MaxFieldValueLength)
		}
		if slices.Contains(d.Choices[:i], c) {
			return fmt.Errorf("%w %s: choice %q named twice", ErrBadField, d.Name, c)
		}
	}
	return nil
}

// Normalize checks a value of the field and answers it as stored: a
// number in Go's shortest form, a date as YYYY-MM-DD, text and choices as
// given. "" is no value (it clears the field).
func (d FieldDef) Normalize(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	switch d.Type {
	case FieldNumber:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return "", fmt.Errorf("%w %s: %q is not a number", ErrBadField, d.Name, v)
		}
		return strconv.FormatFloat(f, 'f', -1, 64), nil
	case FieldDate:
		t, err := time.Parse(time.DateOnly, strings.TrimSpace(v))
		if err != nil {
			return "", fmt.Errorf("%w %s: %q is not a date (YYYY-MM-DD)", ErrBadField, d.Name, v)
		}
		return t.Format(time.DateOnly), nil
	case FieldChoice:
		if !slices.Contains(d.Choices, v) {
			return "", fmt.Errorf("%w %s: %q is not one of %s", ErrBadField, d.Name, v, strings.Join(d.Choices, ", "))
		}
		return v, nil
	}
	if err := checkText(v); err != nil {
		return "", fmt.Errorf("%w %s: %v", ErrBadField, d.Name, err)
	}
	return v, nil
}

// checkText refuses what is not one line of text: invalid UTF-8, control
// characters (the record separator among them), too long.
func checkText(v string) error {
	if len(v) > MaxFieldValueLength {
		return fmt.Errorf("longer than %d bytes", MaxFieldValueLength)
	}
	if !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return errors.New("not one line of text")
	}
	return nil
}

// Fields are the declared fields and the people's values of them.
type Fields interface {
	// DefineField declares a field or changes a choice field's choices;
	// a declared field keeps its type (ErrBadField: the values stored
	// were checked against it). At most MaxFields.
	DefineField(ctx context.Context, d FieldDef) (FieldDef, error)
	// FieldDefs lists the declared fields by name.
	FieldDefs(ctx context.Context) ([]FieldDef, error)
	// SetFields sets subscriber id's values of the fields named
	// (declared ones, each checked and normalised against its
	// declaration: ErrBadField otherwise, and nothing changed); "" clears
	// one. Answers the person's values after. No such id: ErrNotFound.
	SetFields(ctx context.Context, id int64, values map[string]string) (map[string]string, error)
	// FieldsOf reads many people's values, lined up with ids (nil for
	// none or an unknown id): one HMGET per record bucket.
	FieldsOf(ctx context.Context, ids []int64) ([]map[string]string, error)
}

// defineFieldScript declares a field.
//
//	KEYS[1]  the declarations (keyFields)
//	ARGV[1]  name
//	ARGV[2]  type
//	ARGV[3]  the declaration, JSON
//	ARGV[4]  MaxFields
//
// Answers 'ok', 'type' and the type declared before (a field keeps its
// type), or 'full'.
var defineFieldScript = redis.NewScript(`
local was = redis.call('HGET', KEYS[1], ARGV[1])
if was then
  local t = cjson.decode(was).type
  if t ~= ARGV[2] then return {'type', t} end
elseif redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
  return {'full'}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return {'ok'}
`)

// DefineField implements Fields.
func (r *Redis) DefineField(ctx context.Context, d FieldDef) (FieldDef, error) {
	if err := d.Check(); err != nil {
		return FieldDef{}, err
	}
	b, err := json.Marshal(d)
	if err != nil {
		return FieldDef{}, err
	}
	res, err := defineFieldScript.Run(ctx, r.rdb, []string{keyFields}, d.Name, string(d.Type), string(b), MaxFields).StringSlice()
	if err != nil {
		return FieldDef{}, fmt.Errorf("declare field %s: %w", d.Name, err)
	}
	switch res[0] {
	case "type":
		return FieldDef{}, fmt.Errorf("%w %s: it is a %s field; a field keeps its type", ErrBadField, d.Name, res[1])
	case "full":
		return FieldDef{}, fmt.Errorf("%w: at most %d fields", ErrBadField, MaxFields)
	}
	return d, nil
}

// FieldDefs implements Fields.
func (r *Redis) FieldDefs(ctx context.Context) ([]FieldDef, error) {
	all, err := r.rdb.HGetAll(ctx, keyFields).Result()
	if err != nil {
		return nil, fmt.Errorf("declared fields: %w", err)
	}
	out := make([]FieldDef, 0, len(all))
	for name, v := range all {
		var d FieldDef
		if err := json.Unmarshal([]byte(v), &d); err != nil {
			return nil, fmt.Errorf("declared field %s: %w", name, err)
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b FieldDef) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// fieldDefsByName is FieldDefs as a map.
func (r *Redis) fieldDefsByName(ctx context.Context) (map[string]FieldDef, error) {
	defs, err := r.FieldDefs(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]FieldDef, len(defs))
	for _, d := range defs {
		out[d.Name] = d
	}
	return out, nil
}

// CheckFieldValues normalises values against the declarations (Normalize):
// an undeclared field or a bad value is ErrBadField.
func CheckFieldValues(defs map[string]FieldDef, values map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(values))
	for name, v := range values {
		d, ok := defs[name]
		if !ok {
			return nil, fmt.Errorf("%w: no field %q is declared", ErrBadField, name)
		}
		n, err := d.Normalize(v)
		if err != nil {
			return nil, err
		}
		out[name] = n
	}
	return out, nil
}

// setFieldsScript merges values into a person's fields.
//
//	KEYS[1]  the id's shard's anchor
//	ARGV[1]  id
//	ARGV[2…] name, value pairs; an empty value clears the field
//
// Writes the person's packed values (fieldkey), names sorted; deletes
// them when none is left. Answers 'ok' and the packed values, or
// 'notfound'.
var setFieldsScript = subscriberScript(`
local id = ARGV[1]
if redis.call('HEXISTS', subkey(id), id) == 0 then return {'notfound'} end
return {'ok', setfields(id, {unpack(ARGV, 2)})}
`)

// SetFields implements Fields. The declarations are read first: a field
// declared or redeclared meanwhile is checked by the one read.
func (r *Redis) SetFields(ctx context.Context, id int64, values map[string]string) (map[string]string, error) {
	if id <= 0 {
		return nil, ErrNotFound
	}
	defs, err := r.fieldDefsByName(ctx)
	if err != nil {
		return nil, err
	}
	norm, err := CheckFieldValues(defs, values)
	if err != nil {
		return nil, err
	}
	args := []any{id}
	for _, name := range slices.Sorted(maps.Keys(norm)) {
		args = append(args, name, norm[name])
	}
	res, err := setFieldsScript.Run(ctx, r.rdb, []string{anchor(idShard(id))}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("fields of %d: %w", id, err)
	}
	if res[0] == "notfound" {
		return nil, ErrNotFound
	}
	return unpackFields(res[1]), nil
}

// FieldsOf implements Fields.
func (r *Redis) FieldsOf(ctx context.Context, ids []int64) ([]map[string]string, error) {
	vals, err := r.bucketValues(ctx, sfxFieldValues, ids)
	if err != nil {
		return nil, fmt.Errorf("read fields: %w", err)
	}
	out := make([]map[string]string, len(ids))
	for i, v := range vals {
		out[i] = unpackFields(v)
	}
	return out, nil
}

// unpackFields reads packed field values; "" is nil.
func unpackFields(v string) map[string]string {
	if v == "" {
		return nil
	}
	parts := strings.Split(v, recordSep)
	out := make(map[string]string, len(parts)/2)
	for i := 0; i+1 < len(parts); i += 2 {
		out[parts[i]] = parts[i+1]
	}
	return out
}
