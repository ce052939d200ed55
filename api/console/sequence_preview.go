package console

import (
	"context"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/internal/topics"
)

// StepMail previews and test-sends a sequence step's mail, as the
// worker renders it from the catalog in effect (cmd/newsletter's
// issueMail).
type StepMail interface {
	// PreviewStep is the HTML part of step template's mail to the
	// sample reader of topic.
	PreviewStep(ctx context.Context, template, topic string) ([]byte, error)
	// SendStepTest mails it now to each address, subject marked [Test],
	// its unsubscribe and preferences links inert.
	SendStepTest(ctx context.Context, template, topic string, emails []string) error
}

type stepPreviewData struct {
	Number int
	Step   topics.Step
	HTML   string
	// TestOffer and MaxTest are the test-send form's, as an issue's.
	TestOffer []string
	MaxTest   int
}

// stepOf finds the saved sequence's step {n} (1 for the first) and the
// step mail; it answers a bad number, or a console without either,
// itself.
func (h *Handler) stepOf(w http.ResponseWriter, r *http.Request) (int, topics.Sequence, StepMail, bool) {
	if h.catalogMissing(w, r) {
		return 0, topics.Sequence{}, nil, false
	}
	seq := h.d.Catalog.Snapshot().Set.Sequence
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 || n > len(seq.Steps) {
		h.notFound(w, r, "step")
		return 0, seq, nil, false
	}
	sm := h.d.Steps
	if sm == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "No preview", "No step preview here: this process has no mail templates.")
		return 0, seq, nil, false
	}
	return n, seq, sm, true
}

// previewStep is GET /admin/sequence/{n}/preview: the saved step's mail
// as a reader of the sequence's topic gets it (a sample reader), framed
// in a sandbox as an issue's preview is, with its test-send form.
func (h *Handler) previewStep(w http.ResponseWriter, r *http.Request) {
	n, seq, sm, ok := h.stepOf(w, r)
	if !ok {
		return
	}
	h.stepPage(w, r, http.StatusOK, n, seq, sm, "")
}

// stepPage renders step n's preview with code, saying problem when
// there is one.
func (h *Handler) stepPage(w http.ResponseWriter, r *http.Request, code, n int, seq topics.Sequence, sm StepMail, problem string) {
	st := seq.Steps[n-1]
	body, err := sm.PreviewStep(r.Context(), st.Template, seq.Topic)
	if err != nil {
		h.errorPage(w, r, http.StatusInternalServerError, "No preview", "The step's mail could not be rendered: "+err.Error())
		return
	}
	d := stepPreviewData{Number: n, Step: st, HTML: string(body), MaxTest: maxTestEmails,
		TestOffer: h.d.TestGate.Offered(principalOf(r).Name, h.d.Settings.Current(r.Context()).TestRecipients)}
	h.render(w, r, code, "step_preview", page{Title: "Preview of step " + strconv.Itoa(n), Section: "sequence", Error: problem, Data: d})
}
