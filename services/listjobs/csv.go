package listjobs

import (
	"encoding/csv"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/csvcell"
	"github.com/newsletter/newsletter/store"
)

// Row is what one line of the export says about one person.
type Row struct {
	Subscriber store.Subscriber
	Consent    store.Consent
}

// Column is one column of the export: its header (what the importer,
// internal/csvimport, reads by name: email, name, timezone, topics) and
// its value.
type Column struct {
	Name  string
	Value func(Row) string
}

// Columns are the export's columns, in order: what the importer reads
// (a header row names them, so `newsletter import` and the console's
// import read the file as it is; it ignores the others): the four of a
// plain list, the tags (;-separated) and status, then what the importer
// does not take. The custom fields follow them, a "field.NAME" column
// each (ColumnsWith), as the importer reads them too.
var Columns = []Column{
	{"email", func(r Row) string { return r.Subscriber.Email }},
	{"name", func(r Row) string { return r.Subscriber.Name }},
	{"timezone", func(r Row) string { return r.Subscriber.Timezone }},
	{"topics", func(r Row) string { return strings.Join(r.Subscriber.Topics, ";") }},
	{"tags", func(r Row) string { return strings.Join(r.Subscriber.Tags, ";") }},
	{"status", func(r Row) string { return string(r.Subscriber.Status) }},
	{"created_at", func(r Row) string { return csvTime(r.Subscriber.CreatedAt) }},
	{"confirmed_at", func(r Row) string { return csvTime(r.Subscriber.ConfirmedAt) }},
	{"ended_at", func(r Row) string { return csvTime(r.Subscriber.UnsubscribedAt) }},
	{"consent_source", func(r Row) string { return string(r.Consent.Source) }},
	{"consent_at", func(r Row) string { return csvTime(r.Consent.RequestedAt) }},
	{"consent_reason", func(r Row) string { return r.Consent.Reason }},
	{"consent_by", func(r Row) string { return r.Consent.Actor }},
}

// csvTime is a time as the export writes it: RFC 3339 in UTC to the
// millisecond; "" for none.
func csvTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// csvWriter writes the export's rows. Every value is csvcell.Guard-ed:
// a public signup's name such as =HYPERLINK(...) must not run when the
// file is opened in a spreadsheet; the importer (internal/csvimport)
// removes the guard, so the file still imports back unchanged.
type csvWriter struct {
	w    *csv.Writer
	cols []Column
}

func newCSVWriter(w io.Writer, cols []Column) *csvWriter {
	return &csvWriter{w: csv.NewWriter(w), cols: cols}
}

// ColumnsWith are Columns and a "field.NAME" column for each of fields
// (the custom fields' names, in the order the export began with: a
// field declared while it runs is not in it).
func ColumnsWith(fields []string) []Column {
	cols := slices.Clone(Columns)
	for _, name := range fields {
		cols = append(cols, Column{"field." + name, func(r Row) string { return r.Subscriber.Fields[name] }})
	}
	return cols
}

func (c *csvWriter) header() error {
	rec := make([]string, len(c.cols))
	for i, col := range c.cols {
		rec[i] = col.Name
	}
	return c.w.Write(rec)
}

func (c *csvWriter) row(r Row) error {
	rec := make([]string, len(c.cols))
	for i, col := range c.cols {
		rec[i] = csvcell.Guard(col.Value(r))
	}
	return c.w.Write(rec)
}

func (c *csvWriter) flush() error {
	c.w.Flush()
	return c.w.Error()
}
