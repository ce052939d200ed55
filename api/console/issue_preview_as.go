package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/store"
)

type previewAsData struct {
	Issue store.Issue
	// As is html (full width), phone (375 px) or text.
	As         string
	HTML, Text string
}

// phoneWidth is the width the phone preview frames the mail at (CSS px
// of a common phone's screen).
const phoneWidth = 375

// showPreview is GET /admin/issues/{id}/preview?as=html|phone|text: the
// saved issue's mail as a reader of its first topic gets it, at full
// width, in a phone's width, or as its text part. The HTML is framed in
// a sandbox, as the editor's preview is.
func (h *Handler) showPreview(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	as := r.URL.Query().Get("as")
	if as != "phone" && as != "text" {
		as = "html"
	}
	if h.d.Renderer == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "No preview", "No preview here: this process has no mail templates.")
		return
	}
	format := "html"
	if as == "text" {
		format = "text"
	}
	_, body, err := issues.Preview(r.Context(), h.d.Renderer, is, "", format)
	var bad *issues.InputError
	if errors.As(err, &bad) {
		h.errorPage(w, r, http.StatusBadRequest, "No preview", bad.Msg)
		return
	}
	if err != nil {
		h.errorPage(w, r, http.StatusInternalServerError, "No preview", "The mail could not be rendered: "+err.Error())
		return
	}
	d := previewAsData{Issue: is, As: as}
	if as == "text" {
		d.Text = string(body)
	} else {
		d.HTML = string(body)
	}
	h.render(w, r, http.StatusOK, "preview", page{Title: "Preview of " + is.Subject, Section: "issues", Data: d})
}
