package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/services/csvimport"
	"github.com/newsletter/newsletter/tasks"
)

// An upload waits for its mapping (csvimport.StateMapping): its page
// shows the source recognised from the header row, a select of our field
// per column and the first rows; the publisher confirms it (POST), and
// only then is the import queued. The preview reads at most the file's
// first csvimport.PreviewRows rows (1 MiB).

// mappingPage is the mapping step as its page shows it.
type mappingPage struct {
	ID, File, Source string
	Header           bool
	Columns          []mappingColumn
	Rows             [][]string
	// Targets are the choices of every select: our fields, then the
	// declared custom fields (field.NAME).
	Targets []string
	// Wider is the file's count of columns when it has more than
	// csvimport.MaxColumns (only those are offered); 0 otherwise.
	Wider int
	// LongFirstLine: the first line was too long to read, so a header
	// row there was not seen.
	LongFirstLine bool
	MaxColumns    int
	MaxLineKiB    int
}

// mappingColumn is one column: its name (or position), what it maps to.
type mappingColumn struct {
	Index      int
	Name, Maps string
}

// importMapping reads a staged job's file head: the mapping (the one
// confirmed before, or the one recognised) and the first rows.
func (h *Handler) importMapping(ctx context.Context, s csvimport.Status) (mappingPage, error) {
	data, err := h.imports.Data(ctx, s.ID)
	if err != nil {
		return mappingPage{}, err
	}
	head, err := csvimport.Preview(bytes.NewReader(data), csvimport.PreviewRows)
	if err != nil {
		return mappingPage{}, err
	}
	m, rows := head.Mapping, head.Rows
	// A file without a header row: as many columns as its widest row
	// (Preview cut each to MaxColumns).
	for _, r := range rows {
		for len(m.Columns) < len(r) && !m.Header {
			m.Columns = append(m.Columns, "")
		}
	}
	p := mappingPage{ID: s.ID, File: s.File, Source: m.Source, Header: m.Header, Rows: rows, Targets: csvimport.Targets,
		LongFirstLine: head.LongFirstLine, MaxColumns: csvimport.MaxColumns, MaxLineKiB: csvimport.MaxLine >> 10}
	if head.Columns > csvimport.MaxColumns {
		p.Wider = head.Columns
	}
	if fd, ok := h.d.Store.(csvimport.FieldDeclarations); ok {
		defs, err := fd.FieldDefs(ctx)
		if err != nil {
			return mappingPage{}, err
		}
		for _, d := range defs {
			p.Targets = append(p.Targets, "field."+d.Name)
		}
	}
	for i, c := range m.Columns {
		name := fmt.Sprintf("column %d", i+1)
		if i < len(m.Names) {
			name = m.Names[i]
		}
		p.Columns = append(p.Columns, mappingColumn{Index: i, Name: name, Maps: c})
	}
	return p, nil
}

// showImportMapping renders the mapping step of a staged job.
func (h *Handler) showImportMapping(w http.ResponseWriter, r *http.Request, s csvimport.Status, code int, problem string) {
	p, err := h.importMapping(r.Context(), s)
	if errors.Is(err, csvimport.ErrNoJob) {
		h.notFound(w, r, "import")
		return
	}
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.render(w, r, code, "import_mapping", page{Title: "Import " + s.File, Section: "import", Error: problem, Data: p})
}

// confirmImport is POST /admin/import/{job} (col0, col1, …: our field per
// column, "" to leave it out): the mapping is checked, saved with the
// job, and the import queued; a bad mapping shows the step again with
// why, and nothing is queued.
func (h *Handler) confirmImport(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("job")
	s, err := h.imports.Status(r.Context(), id)
	if errors.Is(err, csvimport.ErrNoJob) {
		h.notFound(w, r, "import")
		return
	}
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	if s.State != csvimport.StateMapping {
		http.Redirect(w, r, "/admin/import/"+id, http.StatusSeeOther) // confirmed before
		return
	}
	if h.d.Queue == nil {
		h.showImportMapping(w, r, s, http.StatusServiceUnavailable, "Imports run on the worker, and this console has no task queue. Nothing was imported.")
		return
	}
	p, err := h.importMapping(r.Context(), s)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	m, err := mappingOf(r, p)
	if err == nil {
		err = m.Check()
	}
	if err != nil {
		h.showImportMapping(w, r, s, http.StatusBadRequest, "The mapping cannot be used: "+err.Error()+". Nothing was imported.")
		return
	}
	ok, err := h.imports.Confirm(r.Context(), id, m)
	if err != nil || !ok {
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		http.Redirect(w, r, "/admin/import/"+id, http.StatusSeeOther)
		return
	}
	if _, err := h.d.Queue.EnqueueContext(r.Context(), tasks.NewImportRun(id)); err != nil {
		// Nothing was read yet: the job waits for its mapping again.
		if uerr := h.imports.Unconfirm(context.WithoutCancel(r.Context()), id); uerr != nil {
			h.d.Log.Warn("console: an import that could not be queued was not put back", "import", id, "err", uerr)
		}
		h.storeAway(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/import/"+id, http.StatusSeeOther)
}

// mappingOf reads the form's select per column: each column's field
// given once (a select sent twice is a forged or broken form), and a
// custom field only if it is declared (an undeclared one would reject
// every row once the import ran).
func mappingOf(r *http.Request, p mappingPage) (csvimport.Mapping, error) {
	m := csvimport.Mapping{Source: p.Source, Header: p.Header, Columns: make([]string, len(p.Columns))}
	if err := r.ParseForm(); err != nil {
		return m, err
	}
	for _, c := range p.Columns {
		if p.Header {
			m.Names = append(m.Names, c.Name)
		}
		field := "col" + strconv.Itoa(c.Index)
		vals := r.PostForm[field]
		if len(vals) > 1 {
			return m, fmt.Errorf("%s (%s) was given %d times", field, c.Name, len(vals))
		}
		if len(vals) == 1 {
			m.Columns[c.Index] = vals[0]
		}
		if t := m.Columns[c.Index]; strings.HasPrefix(t, "field.") && !slices.Contains(p.Targets, t) {
			return m, fmt.Errorf("no custom field %q is declared (declare it under Fields, or POST /api/fields, first)", strings.TrimPrefix(t, "field."))
		}
	}
	return m, nil
}
