package console

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/newsletter/newsletter/internal/httpbody"
	"github.com/newsletter/newsletter/services/csvimport"
)

// uploadImport is POST /admin/import (multipart: file, pending): the
// file is checked to be text and stored; the browser goes to its page,
// which shows the columns' mapping to confirm, then its progress once the
// worker imports it (tasks.TypeImportRun) through csvimport, as
// `newsletter import` does. The worker writes the audit entry with the
// final counts.
func (h *Handler) uploadImport(w http.ResponseWriter, r *http.Request) {
	if h.d.Queue == nil {
		h.importForm(w, r, http.StatusServiceUnavailable, "Imports run on the worker, and this console has no task queue. Nothing was imported.")
		return
	}
	err := httpbody.Limit(w, r, h.cfg.MaxUpload+64<<10)
	if err == nil {
		var done func()
		done, err = httpbody.ParseMultipartForm(r, 1<<20)
		defer done()
	}
	if err != nil {
		if httpbody.IsTooLarge(err) {
			h.importForm(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The file is larger than %d MB: split it, or use `newsletter import`. Nothing was imported.", h.cfg.MaxUpload>>20))
			return
		}
		h.importForm(w, r, http.StatusBadRequest, "The upload could not be read. Nothing was imported.")
		return
	}
	file, hdr, err := r.FormFile("file")
	if err != nil {
		h.importForm(w, r, http.StatusBadRequest, "Choose a CSV file to upload.")
		return
	}
	defer func() { _ = file.Close() }() // read-only
	data, err := io.ReadAll(io.LimitReader(file, h.cfg.MaxUpload+1))
	if err != nil {
		h.importForm(w, r, http.StatusBadRequest, "The upload could not be read. Nothing was imported.")
		return
	}
	if int64(len(data)) > h.cfg.MaxUpload {
		h.importForm(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The file is larger than %d MB. Nothing was imported.", h.cfg.MaxUpload>>20))
		return
	}
	if problem := notCSV(hdr.Filename, data); problem != "" {
		h.importForm(w, r, http.StatusUnsupportedMediaType, problem+" Nothing was imported.")
		return
	}
	p := principalOf(r)
	lines, err := csvimport.CountLines(bytes.NewReader(data))
	if err != nil {
		h.importForm(w, r, http.StatusBadRequest, "The upload could not be read. Nothing was imported.")
		return
	}
	id := csvimport.NewJobID()
	job := csvimport.Job{File: filepath.Base(hdr.Filename), Size: int64(len(data)), Pending: r.PostFormValue("pending") == "1",
		By: p.Name, Role: string(p.Role), Lines: lines}
	// Staged: its page shows the mapping to confirm (import_mapping.go),
	// which queues it.
	if err := h.imports.Stage(r.Context(), id, job, data); err != nil {
		h.storeAway(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/import/"+id, http.StatusSeeOther)
}

// notCSV says why data is not a CSV file of addresses ("" when it may
// be): a name with another extension, binary bytes, or text that is not
// UTF-8.
func notCSV(name string, data []byte) string {
	ext := strings.ToLower(filepath.Ext(name))
	if ext != ".csv" && ext != ".txt" {
		return "This is not a CSV file (the name should end in .csv)."
	}
	head := data[:min(len(data), 64<<10)]
	if bytes.IndexByte(head, 0) >= 0 {
		return "This file is not text: it holds binary data (a spreadsheet? save it as CSV first)."
	}
	// Cut a last rune that the head's end may have split.
	for i := 0; len(head) < len(data) && i < utf8.UTFMax-1 && !utf8.Valid(head); i++ {
		head = head[:len(head)-1]
	}
	if !utf8.Valid(head) {
		return "This file is not UTF-8 text: save it as CSV UTF-8."
	}
	return ""
}
