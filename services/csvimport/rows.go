package csvimport

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/csvcell"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// header reads line 1: true when it names the columns (the mapping given
// says so, or Recognise finds an address column in it).
func (ir *importRun) header(rec []string, reason string) bool {
	if m := ir.im.Mapping; m != nil {
		return m.Header
	}
	if reason != "" {
		return false
	}
	m, ok := Recognise(rec)
	ir.setMapping(m)
	return ok
}

func (ir *importRun) setMapping(m Mapping) {
	ir.mapping = m
	ir.col = map[string]int{}
	for i, c := range m.Columns {
		if _, dup := ir.col[c]; c != "" && !dup {
			ir.col[c] = i
		}
	}
}

// add takes one row to the batch, or rejects it with its reason.
func (ir *importRun) add(line int64, rec []string) {
	req, why := ir.row(rec)
	if why == "" {
		why = ir.extras(rec, &req)
	}
	if why != "" {
		ir.reject(line, why)
		return
	}
	if ir.im.Pending {
		job := tasks.NewConfirm(req.Email, ir.now())
		req.Outbox = job.Outbox()
		ir.jobs = append(ir.jobs, job)
	}
	ir.reqs, ir.reqLines = append(ir.reqs, req), append(ir.reqLines, line)
}

// extras reads the row's tags, attributes and field.NAME columns into
// req, or says why the row is rejected: a bad tag, an undeclared field, a
// value its field's type refuses.
func (ir *importRun) extras(rec []string, req *store.SubscribeRequest) string {
	for _, t := range splitTags(ir.field(rec, ColTags)) {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if ir.mapping.Source != SourceGeneric {
			t = slugTag(t) // a service's tags are free text; ours are slugs
		}
		if err := store.CheckTag(t); err != nil {
			return err.Error()
		}
		if !slices.Contains(req.Tags, t) {
			req.Tags = append(req.Tags, t)
		}
	}
	if len(req.Tags) > store.MaxTagsPerPerson {
		return fmt.Sprintf("more than %d tags", store.MaxTagsPerPerson)
	}
	values, why := ir.attributes(rec)
	if why != "" {
		return why
	}
	for col := range ir.col {
		if name, ok := strings.CutPrefix(col, "field."); ok {
			if v := ir.field(rec, col); v != "" {
				values[name] = v
			}
		}
	}
	for name, v := range values {
		d, declared := ir.fields[name]
		if !declared {
			return fmt.Sprintf("no field %q is declared (POST /api/fields declares one)", name)
		}
		n, err := d.Normalize(v)
		if err != nil {
			return err.Error()
		}
		if req.Fields == nil {
			req.Fields = map[string]string{}
		}
		req.Fields[name] = n
	}
	return ""
}

// attributes reads the JSON object column (listmonk's attributes,
// Buttondown's metadata): the values of its keys that name a declared
// field, as text. Other keys are the service's own and are left out.
func (ir *importRun) attributes(rec []string) (map[string]string, string) {
	values := map[string]string{}
	raw := ir.field(rec, ColAttributes)
	if raw == "" {
		return values, ""
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(raw), &obj); err != nil {
		return nil, "attributes: not a JSON object"
	}
	for k, v := range obj {
		name := strings.ToLower(k)
		if _, declared := ir.fields[name]; !declared || v == nil {
			continue
		}
		switch v := v.(type) {
		case string:
			values[name] = v
		case float64, bool:
			values[name] = fmt.Sprint(v)
		default:
			return nil, fmt.Sprintf("attributes: %s is not a single value", k)
		}
	}
	return values, ""
}

// splitTags reads a tags cell as the services write it: ours (a;b),
// Mailchimp's quoted list ("Tag A","Tag B"), a JSON list (["a","b"]), or
// commas (a, b).
func splitTags(v string) []string {
	var tags []string
	switch {
	case v == "":
		return nil
	case strings.HasPrefix(v, "["):
		if json.Unmarshal([]byte(v), &tags) == nil {
			return tags
		}
		v = strings.Trim(v, "[]")
	case strings.HasPrefix(v, `"`):
		cr := csv.NewReader(strings.NewReader(v))
		cr.TrimLeadingSpace = true
		if rec, err := cr.Read(); err == nil {
			return rec
		}
	}
	return strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == ',' })
}

// slugTag makes a service's tag one of ours: lower case, a dash for each
// run of other characters than a-z, 0-9, - and _ ("VIP Customer" is
// vip-customer). A tag with nothing left is refused by CheckTag.
func slugTag(t string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(strings.TrimSpace(strings.Trim(t, `"' `))) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimRight(b.String(), "-")
}

// field is the column mapped to name, trimmed, without the guard an
// export puts before a value a spreadsheet would take for a formula
// (csvcell); "" where it has none.
func (ir *importRun) field(rec []string, name string) string {
	if i, ok := ir.col[name]; ok && i < len(rec) {
		return strings.TrimSpace(csvcell.Unguard(rec[i]))
	}
	return ""
}

// statusWords are the services' status words: active (true) or awaiting
// confirmation (false). Any other word (unsubscribed, cleaned, cancelled,
// bounced, complained, blocklisted, disabled, removed, …) is someone who
// is not subscribed.
var statusWords = map[string]bool{
	"": true, "active": true, "subscribed": true, "enabled": true, "confirmed": true,
	// Buttondown's subscriber types that get the newsletter.
	"regular": true, "premium": true, "gifted": true, "trialed": true, "churning": true, "past_due": true,
	// Never confirmed: Kit's inactive, Buttondown's unactivated.
	"pending": false, "unconfirmed": false, "unactivated": false, "inactive": false,
}

// status says why the row's person is not imported ("" when they are):
// only a running subscription comes in. Importing the rest would
// subscribe people who left, bounced or never confirmed.
func (ir *importRun) status(rec []string) string {
	if v := strings.ToLower(ir.field(rec, ColLeft)); v != "" && v != "false" && v != "0" && v != "no" {
		name := ColLeft
		if i := ir.col[ColLeft]; i < len(ir.mapping.Names) {
			name = ir.mapping.Names[i]
		}
		return name + " is set: not subscribed, not imported"
	}
	st := strings.ToLower(ir.field(rec, ColStatus))
	active, known := statusWords[st]
	switch {
	case known && active:
		return ""
	case known && ir.im.Pending:
		return ""
	case known:
		return "status " + st + ": never confirmed (import it with confirmations, or leave it out)"
	}
	return "status " + st + ": not subscribed, not imported"
}

// row checks one record and makes its request, or says why not.
func (ir *importRun) row(rec []string) (store.SubscribeRequest, string) {
	im := ir.im
	email, err := address.Normalize(ir.field(rec, ColEmail))
	if err != nil {
		return store.SubscribeRequest{}, "invalid address"
	}
	req := store.SubscribeRequest{Email: email, Activate: !im.Pending, OnlyNew: true, Source: store.SourceImport}
	if why := ir.status(rec); why != "" {
		return req, why
	}
	name := ir.field(rec, ColName)
	if name == "" {
		name = strings.TrimSpace(ir.field(rec, ColFirstName) + " " + ir.field(rec, ColLastName))
	}
	if req.Name, err = address.CheckName(name); err != nil {
		return req, err.Error()
	}
	// Topics: ids separated by spaces, semicolons or (in a quoted
	// field) commas; none gives the default topics.
	if ids := strings.FieldsFunc(ir.field(rec, ColTopics), func(r rune) bool { return r == ' ' || r == ';' || r == ',' || r == '|' }); len(ids) > 0 {
		if req.Topics, err = ir.set.Check(ids); err != nil {
			return req, err.Error()
		}
	} else if req.Topics = ir.set.Defaults(); len(req.Topics) == 0 {
		return req, "no topics, and none is on by default in the topics file"
	}
	if tz := ir.field(rec, ColTimezone); tz != "" {
		req.Timezone = tz
		ok, seen := ir.zones[tz]
		if !seen {
			_, err := time.LoadLocation(tz)
			ok = err == nil && !strings.ContainsAny(tz, "\r\n")
			ir.zones[tz] = ok
		}
		if !ok {
			return req, "unknown time zone " + tz
		}
	}
	return req, ""
}
