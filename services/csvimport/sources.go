package csvimport

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/newsletter/newsletter/store"
)

// The sources an export is recognised as, by its header row.
const (
	SourceGeneric    = "generic"
	SourceMailchimp  = "mailchimp"
	SourceSubstack   = "substack"
	SourceKit        = "kit"
	SourceButtondown = "buttondown"
	SourceListmonk   = "listmonk"
)

// Sources are the recognised sources, generic last.
var Sources = []string{SourceMailchimp, SourceSubstack, SourceKit, SourceButtondown, SourceListmonk, SourceGeneric}

// The fields a column maps to ("" is a column left out). Beside them a
// column may map to field.NAME, a declared custom field.
const (
	ColEmail     = "email"
	ColName      = "name"
	ColFirstName = "first_name" // joined with last_name into the name
	ColLastName  = "last_name"
	ColTimezone  = "timezone"
	ColTopics    = "topics"
	ColTags      = "tags"
	// ColStatus is a status word (active, unsubscribed, blocklisted, …):
	// only a running subscription comes in (statusWords).
	ColStatus = "status"
	// ColLeft is a column whose value, when set, says the person left:
	// Mailchimp's UNSUB_TIME and CLEAN_TIME, Substack's email_disabled.
	ColLeft = "left"
	// ColAttributes is a JSON object (listmonk's attributes, Buttondown's
	// metadata): its keys that name a declared custom field are kept.
	ColAttributes = "attributes"
)

// Targets are the fields a column may map to, in the order a form lists
// them (field.NAME apart).
var Targets = []string{ColEmail, ColName, ColFirstName, ColLastName, ColTimezone, ColTopics, ColTags, ColStatus, ColLeft, ColAttributes}

// Mapping says what each column of a file is: the source recognised from
// its header row, and our field per column.
type Mapping struct {
	Source string `json:"source"`
	// Header is true when line 1 names the columns (it is not a row).
	Header bool `json:"header"`
	// Names are the header row's column names as written (none without
	// a header).
	Names []string `json:"names,omitempty"`
	// Columns is our field per column, by position ("" left out).
	Columns []string `json:"columns"`
}

// positional is the mapping of a file without a header row (Columns).
func positional() Mapping {
	return Mapping{Source: SourceGeneric, Columns: []string{ColEmail, ColName, ColTimezone, ColTopics}}
}

// CheckTarget says why t is not a field a column may map to.
func CheckTarget(t string) error {
	if t == "" || slices.Contains(Targets, t) {
		return nil
	}
	if name, ok := strings.CutPrefix(t, "field."); ok && (store.FieldDef{Name: name, Type: store.FieldText}).Check() == nil {
		return nil
	}
	return fmt.Errorf("no field %q to map a column to (one of %s, field.NAME, or nothing)", t, strings.Join(Targets, ", "))
}

// Set maps the column named column (as the header row writes it, case
// ignored) to target; an error for an unknown column or target.
func (m *Mapping) Set(column, target string) error {
	if err := CheckTarget(target); err != nil {
		return err
	}
	for i, n := range m.Names {
		if strings.EqualFold(strings.TrimSpace(n), strings.TrimSpace(column)) {
			m.Columns[i] = target
			return nil
		}
	}
	return fmt.Errorf("the file has no column %q", column)
}

// Check says why the mapping cannot import anything: no email column, or
// a field mapped twice.
func (m Mapping) Check() error {
	seen := map[string]bool{}
	for _, c := range m.Columns {
		if err := CheckTarget(c); err != nil {
			return err
		}
		if c != "" && seen[c] {
			return fmt.Errorf("two columns are mapped to %s", c)
		}
		seen[c] = true
	}
	if !seen[ColEmail] {
		return errors.New("no column is mapped to email")
	}
	return nil
}

// String is the mapping in one line per column, as `newsletter import`
// prints it.
func (m Mapping) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "source: %s\n", m.Source)
	for i, c := range m.Columns {
		name := fmt.Sprintf("column %d", i+1)
		if i < len(m.Names) {
			name = fmt.Sprintf("%q", m.Names[i])
		}
		if c == "" {
			c = "(left out)"
		}
		fmt.Fprintf(&b, "  %s -> %s\n", name, c)
	}
	return b.String()
}

// Recognise reads a header row: which service wrote it, and what each
// column is. A row that names no address column is no header (header
// false) and the columns are positional (Columns).
func Recognise(row []string) (m Mapping, header bool) {
	m = RecogniseAs("", row)
	if !slices.Contains(m.Columns, ColEmail) {
		return positional(), false
	}
	return m, true
}

// RecogniseAs reads row as the header row of source's export ("": the
// service its names tell), whether or not a column is the address.
func RecogniseAs(src string, row []string) Mapping {
	names := make([]string, len(row))
	has := map[string]bool{}
	for i, h := range row {
		names[i] = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		has[strings.ToLower(names[i])] = true
	}
	if src == "" {
		src = sourceOf(has)
	}
	m := Mapping{Source: src, Header: true, Names: names, Columns: make([]string, len(names))}
	for i, n := range names {
		m.Columns[i] = columnOf(src, n)
	}
	// A name mapped twice keeps its first column.
	seen := map[string]bool{}
	for i, c := range m.Columns {
		if c != "" && seen[c] {
			m.Columns[i] = ""
		}
		seen[c] = true
	}
	return m
}

// sourceOf tells the service from the header's names (lower case): each
// writes a few columns no other does.
func sourceOf(has map[string]bool) string {
	switch {
	case has["email address"] && (has["member_rating"] || has["optin_time"] || has["leid"] || has["euid"]):
		return SourceMailchimp
	case has["uuid"] && has["email"] && has["attributes"]:
		return SourceListmonk
	case has["subscriber_type"] || (has["creation_date"] && has["metadata"]):
		return SourceButtondown
	case has["email"] && (has["active_subscription"] || has["email_disabled"]):
		return SourceSubstack
	case (has["email"] || has["email_address"]) && has["first_name"] && (has["status"] || has["state"]) && has["created_at"]:
		return SourceKit
	}
	return SourceGeneric
}

// sourceColumns are the columns each service names its own way (lower
// case); the others are read by their generic names (genericColumns).
var sourceColumns = map[string]map[string]string{
	SourceMailchimp: {"email address": ColEmail, "first name": ColFirstName, "last name": ColLastName, "timezone": ColTimezone,
		"tags": ColTags, "unsub_time": ColLeft, "clean_time": ColLeft},
	SourceSubstack:   {"email": ColEmail, "name": ColName, "email_disabled": ColLeft},
	SourceKit:        {"email": ColEmail, "email_address": ColEmail, "first_name": ColName, "status": ColStatus, "state": ColStatus, "tags": ColTags},
	SourceButtondown: {"email": ColEmail, "email_address": ColEmail, "subscriber_type": ColStatus, "type": ColStatus, "tags": ColTags, "metadata": ColAttributes},
	SourceListmonk:   {"email": ColEmail, "name": ColName, "status": ColStatus, "attributes": ColAttributes},
}

// genericColumns are our own columns' names and their common spellings.
var genericColumns = map[string]string{
	"email": ColEmail, "e-mail": ColEmail, "email address": ColEmail, "email_address": ColEmail,
	"name": ColName, "full name": ColName, "first name": ColFirstName, "first_name": ColFirstName,
	"last name": ColLastName, "last_name": ColLastName, "timezone": ColTimezone, "topics": ColTopics,
	"tags": ColTags, "status": ColStatus,
}

func columnOf(src, name string) string {
	low := strings.ToLower(name)
	if src != SourceGeneric {
		return sourceColumns[src][low] // a service's other columns are its own
	}
	if c, ok := genericColumns[low]; ok {
		return c
	}
	if f, ok := strings.CutPrefix(low, "field."); ok && f != "" {
		return "field." + f
	}
	return ""
}

// PreviewRows is how many rows a preview shows at most.
const PreviewRows = 5

// maxPreviewBytes bounds what a preview reads, whatever the file.
const maxPreviewBytes = 1 << 20

// MaxColumns bounds the columns a preview shows and a mapping step
// offers: an export has tens (Mailchimp's about 30), and a page of a
// select per column for tens of thousands would cost the browser and the
// server megabytes (the probe's 65,001 columns made a 40 MB page).
// Columns past it are left out of the import.
const MaxColumns = 200

// Head is the start of a file as a preview shows it.
type Head struct {
	Mapping Mapping    // as recognised (at most MaxColumns columns)
	Rows    [][]string // the first rows, each cut to MaxColumns
	// Columns is the widest line's count of columns, before MaxColumns.
	Columns int
	// LongFirstLine: the first line was over MaxLine and was left out,
	// so a header row there was not read.
	LongFirstLine bool
}

// Preview reads the head of a file: its mapping as recognised, and its
// first n rows (at most PreviewRows) as parsed; it reads at most 1 MiB.
// A line that does not parse shows as one cell saying why.
func Preview(r io.Reader, n int) (Head, error) {
	n = min(max(n, 0), PreviewRows)
	lr := newLineReader(io.LimitReader(r, maxPreviewBytes))
	h := Head{Mapping: positional()}
	for line := 1; len(h.Rows) < n; line++ {
		text, tooLong, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return h, err
		}
		if line == 1 {
			text = []byte(strings.TrimPrefix(string(text), "\ufeff"))
			h.LongFirstLine = tooLong
		}
		if tooLong || len(strings.TrimSpace(string(text))) == 0 {
			continue
		}
		rec, reason := parseLine(text)
		h.Columns = max(h.Columns, len(rec))
		rec = rec[:min(len(rec), MaxColumns)]
		if line == 1 && reason == "" {
			var header bool
			if h.Mapping, header = Recognise(rec); header {
				continue
			}
		}
		if reason != "" {
			rec = []string{"(" + reason + ")"}
		}
		h.Rows = append(h.Rows, rec)
	}
	return h, nil
}
