package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/media"
	"github.com/newsletter/newsletter/store"
)

// uploadIssueImage is POST /admin/issues/{id}/media: the editor's form
// posted with an image (multipart, the Upload button's formaction). The
// image is stored as POST /api/media stores it, and the editor comes
// back with the text as it was typed and the image's Markdown added at
// the end of the body, not saved yet: no typing is lost, and no script
// is needed. A refused image leaves the text as typed and says why.
func (h *Handler) uploadIssueImage(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	in, err := form.NewIssueImage(w, r)
	if err != nil && !errors.Is(err, form.ErrNoImage) {
		h.editor(w, r, form.Status(err), is, formOf(is), "The image was not uploaded: "+err.Error()+". Nothing was saved.")
		return
	}
	if !store.Editable(is.Status) {
		h.editor(w, r, http.StatusConflict, is, formOf(is), "The issue is "+is.Status+": its body can no longer change. Nothing was uploaded.")
		return
	}
	if err != nil {
		h.editor(w, r, http.StatusBadRequest, is, in.Issue, err.Error()+". Nothing was saved.")
		return
	}
	m, err := h.d.Media.Upload(r.Context(), in.Image, in.Alt)
	if err != nil {
		code := http.StatusServiceUnavailable
		switch {
		case errors.Is(err, media.ErrTooLarge):
			code = http.StatusRequestEntityTooLarge
		case errors.Is(err, media.ErrTooManyPixels):
			code = http.StatusUnprocessableEntity
		case errors.Is(err, media.ErrNotImage):
			code = http.StatusUnsupportedMediaType
		case errors.Is(err, media.ErrEmpty):
			code = http.StatusBadRequest
		case !errors.Is(err, media.ErrBusy):
			h.d.Log.Error("console: image not stored", "err", err)
			err = errors.New("it could not be stored just now; try again")
		}
		h.editor(w, r, code, is, in.Issue, "The image was not uploaded: "+err.Error()+". Your text is below, not saved yet.")
		return
	}
	h.record(r, audit.MediaUploaded, "media:"+m.Name, m.ContentType)
	in.Issue.Body = strings.TrimRight(in.Issue.Body, "\n") + "\n\n" + m.Markdown + "\n"
	h.editorPage(w, r, http.StatusOK, is, in.Issue, "", m.Markdown)
}
