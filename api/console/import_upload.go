package console

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/csvimport"
	"github.com/newsletter/newsletter/internal/httpbody"
)

// uploadImport is POST /admin/import (multipart: file, pending): the
// file is checked to be text, then imported in the background by
// csvimport, as `newsletter import` does; the browser goes to its
// progress page.
func (h *Handler) uploadImport(w http.ResponseWriter, r *http.Request) {
	err := httpbody.Limit(w, r, h.cfg.MaxUpload+64<<10)
	if err == nil {
		err = r.ParseMultipartForm(1 << 20)
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
	pending := r.PostFormValue("pending") == "1"
	s := importStatus{ID: newImportID(), State: importRunning, File: filepath.Base(hdr.Filename), Size: int64(len(data)), Pending: pending, By: p.Name}
	importer := &csvimport.Importer{Store: h.d.Store, Queue: h.d.Queue, Pending: pending, Now: h.d.Now, Topics: h.cfg.Topics}
	err = h.imports.start(s, data, importer, func(s importStatus) {
		// The request is long answered: the entry has a context of its own.
		h.audit(context.Background(), p, audit.Imported, "import:"+s.ID,
			fmt.Sprintf("%s: %d added, %d already present, %d rejected (%s)", s.File, s.Added, s.Present, s.Rejected, s.State))
	})
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/import/"+s.ID, http.StatusSeeOther)
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
