package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/presend"
	"github.com/newsletter/newsletter/store"
)

type previewAsData struct {
	Issue store.Issue
	// As is html (full width), phone (375 px), narrow (320 px) or text;
	// Dark, whether the mail's dark-mode styles are applied (darkMode).
	As         string
	Dark       bool
	HTML, Text string
	// Checks are the issue's pre-send checks (issue_checks.go).
	Checks []presend.Result
}

// phoneWidth is the width the phone preview frames the mail at (CSS px
// of a common phone's screen).
const phoneWidth = 375

// showPreview is GET /admin/issues/{id}/preview?as=html|phone|narrow|text
// [&dark=1]: the saved issue's mail as a reader of its first topic gets
// it, at full width, in a phone's width, at 320 px (the narrowest phones)
// or as its text part, in dark mode when asked, with its pre-send
// checks. The HTML is framed in a sandbox, as the editor's preview is.
func (h *Handler) showPreview(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
	if !ok {
		return
	}
	as := r.URL.Query().Get("as")
	if as != "phone" && as != "narrow" && as != "text" {
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
	d := previewAsData{Issue: is, As: as, Dark: as != "text" && r.URL.Query().Get("dark") == "1"}
	switch {
	case as == "text":
		d.Text = string(body)
	case d.Dark:
		d.HTML = darkMode(string(body))
	default:
		d.HTML = string(body)
	}
	d.Checks, _ = h.checkLines(r.Context(), is)
	h.render(w, r, http.StatusOK, "preview", page{Title: "Preview of " + is.Subject, Section: "issues", Data: d})
}
