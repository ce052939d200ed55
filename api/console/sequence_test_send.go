package console

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/issues"
)

// maxTestEmails is the most addresses a test send reaches.
const maxTestEmails = issues.MaxTestEmails

// testStep is POST /admin/sequence/{n}/test: the saved step's mail, sent
// now through the real path to the addresses of the test-send form,
// under the same allowance as an issue's test (issues.TestGate: one's
// own address, NEWSLETTER_TEST_RECIPIENTS, the settings' test list).
func (h *Handler) testStep(w http.ResponseWriter, r *http.Request) {
	n, seq, sm, ok := h.stepOf(w, r)
	if !ok {
		return
	}
	f, err := form.NewTestSend(w, r)
	var emails []string
	if err == nil {
		emails, err = issues.CheckTestEmails(f.Emails)
	}
	if err == nil {
		err = h.d.TestGate.Allow(principalOf(r).Name, emails, h.d.Settings.Current(r.Context()).TestRecipients)
	}
	var bad *issues.InputError
	var rate *issues.TestRateError
	switch {
	case errors.As(err, &bad):
		h.stepPage(w, r, http.StatusBadRequest, n, seq, sm, "Not sent: "+bad.Msg+".")
		return
	case errors.Is(err, issues.ErrTestRecipient):
		h.stepPage(w, r, http.StatusForbidden, n, seq, sm, "Not sent: "+err.Error()+".")
		return
	case errors.As(err, &rate):
		h.stepPage(w, r, http.StatusTooManyRequests, n, seq, sm, "Not sent: "+err.Error()+".")
		return
	case err != nil:
		h.stepPage(w, r, form.Status(err), n, seq, sm, err.Error())
		return
	}
	st := seq.Steps[n-1]
	if err := sm.SendStepTest(r.Context(), st.Template, seq.Topic, emails); err != nil {
		h.d.Log.Error("console: step test send failed", "step", st.Template, "err", err)
		h.stepPage(w, r, http.StatusBadGateway, n, seq, sm, "The test mail was not sent: "+err.Error())
		return
	}
	h.record(r, audit.IssueTestSent, "sequence:"+st.Template, h.testDetail(emails))
	done(w, r, "/admin/sequence/"+strconv.Itoa(n)+"/preview", "tested")
}
