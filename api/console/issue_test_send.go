package console

import (
	"net/http"
	"strings"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/issues"
)

// testIssue is POST /admin/issues/{id}/test: the saved issue, mailed now
// through the real path to up to issues.MaxTestEmails addresses, as POST
// /api/issues/{id}/test does.
func (h *Handler) testIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := h.issueOf(w, r)
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
	if err != nil {
		h.issueFailed(w, r, is, formOf(is), err)
		return
	}
	if h.d.Renderer == nil {
		h.errorPage(w, r, http.StatusServiceUnavailable, "No mail here", "This process has no mail transport: test sends go from a process with NEWSLETTER_SMTP_URL.")
		return
	}
	if err := h.d.Renderer.SendTest(r.Context(), is, emails); err != nil {
		h.d.Log.Error("console: test send failed", "issue", is.ID, "err", err)
		h.editor(w, r, http.StatusBadGateway, is, formOf(is), "The test mail was not sent: "+err.Error())
		return
	}
	h.record(r, audit.IssueTestSent, audit.Issue(is.ID), h.testDetail(emails))
	done(w, r, "/admin/issues/"+itoa(is.ID), "tested")
}

// testDetail is the audit's detail of a test send: each address by its
// keyed hash, never the address.
func (h *Handler) testDetail(emails []string) string {
	hashes := make([]string, len(emails))
	for i, e := range emails {
		hashes[i] = h.d.Audit.Subscriber(e)
	}
	return "to " + strings.Join(hashes, ", ")
}
