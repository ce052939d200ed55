package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/httpbody"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/settings"
	"github.com/newsletter/newsletter/store"
)

// IssueStore is the store's side of issues the API uses.
type IssueStore interface {
	store.Issues
}

// maxIssuePage is the most issues one GET /api/issues answers.
const maxIssuePage = 100

var (
	issueFields = fields{"subject": textField, "preheader": textField, "body": textField, "topics": listField, "version": countField,
		"reply_to": textField, "segment": textField}
	// PUT's body: the issue's fields and its slug ("" or absent: kept).
	putIssueFields = withField(issueFields, "slug", textField)
	versionFields  = fields{"version": countField}
	sendFields     = fields{"at": textField, "local_time": textField, "confirm_audience": countField, "force": flagField, "version": countField,
		"ignore_checks": flagField}
	whenFields = fields{"at": textField, "local_time": textField}
	testFields = fields{"emails": listField}
)

func (s *Server) issueRoutes() {
	if s.deps.Issues == nil {
		return
	}
	s.checker = s.deps.IssueChecker
	if s.checker == nil {
		s.checker = s.ownChecker()
	}
	s.issues = s.deps.IssueService
	if s.issues == nil {
		s.issues = issues.New(issues.Parts{Store: s.deps.Issues, Jobs: s.deps.Jobs, Log: s.deps.Log, Now: s.deps.Now,
			BulkReady: s.deps.Settings.BulkReady, Sizer: s.deps.IssueRenderer, Checker: s.checker})
	}
	// Readers of the issues (viewer) and their writers (editor), as
	// the reference's table of roles says.
	v := func(h http.HandlerFunc) http.Handler { return s.Viewer(h) }
	e := func(h http.HandlerFunc) http.Handler { return s.Editor(h) }
	s.mux.Handle("POST /api/issues", e(s.createIssue))
	s.mux.Handle("GET /api/issues", v(s.listIssues))
	s.mux.Handle("GET /api/issues/{id}", v(s.getIssue))
	s.mux.Handle("PUT /api/issues/{id}", e(s.putIssue))
	s.mux.Handle("GET /api/issues/{id}/preview", v(s.previewIssue))
	s.mux.Handle("GET /api/issues/{id}/checks", v(s.issueChecks))
	s.mux.Handle("POST /api/issues/{id}/test", e(s.testIssue))
	s.mux.Handle("POST /api/issues/{id}/send", e(s.sendIssue))
	s.mux.Handle("GET /api/issues/{id}/audience", v(s.issueAudience))
	for _, action := range issues.Actions {
		s.mux.Handle("POST /api/issues/{id}/"+action, e(s.issueAction(action)))
	}
	s.mux.Handle("GET /api/issues/{id}/progress", v(s.issueProgress))
	s.mux.Handle("POST /api/issues/{id}/duplicate", e(s.duplicateIssue))
	s.mux.Handle("DELETE /api/issues/{id}", e(s.deleteIssue))
	s.mux.Handle("POST /api/issues/{id}/restore", e(s.restoreIssue))
	s.mux.Handle("GET /api/issues/{id}/versions", v(s.issueVersions))
	s.mux.Handle("POST /api/issues/{id}/versions/{n}/restore", e(s.restoreIssueVersion))
	s.mux.Handle("GET /api/issues/{id}/report", v(s.issueReport))
}

// duplicateIssue handles POST /api/issues/{id}/duplicate: 201 with the
// new draft (the same content, its subject marked " (copy)").
func (s *Server) duplicateIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	c, err := s.issues.Duplicate(r.Context(), is)
	if err != nil {
		s.storeFailed(w, "store the copy", err)
		return
	}
	s.note(r, audit.IssueDuplicated, audit.Issue(c.ID), "copy of "+audit.Issue(is.ID))
	webjson.Write(w, http.StatusCreated, c)
}

// issueVersions handles GET /api/issues/{id}/versions: the current
// version and the kept previous ones, newest first.
func (s *Server) issueVersions(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	vs, err := s.issues.Versions(r.Context(), is)
	if err != nil {
		s.storeFailed(w, "load the versions", err)
		return
	}
	slices.Reverse(vs)
	webjson.Write(w, http.StatusOK, map[string]any{"version": is.Version, "versions": vs})
}

// restoreIssueVersion handles POST /api/issues/{id}/versions/{n}/restore
// {"version"}: version n's content becomes the newest version, when the
// issue is still at "version" (the one the writer saw; 409 otherwise).
func (s *Server) restoreIssueVersion(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n <= 0 {
		webjson.Write(w, http.StatusNotFound, errorBody(issues.ErrNoVersion.Error()))
		return
	}
	in := s.readAdminJSON(w, r, versionFields, true)
	if in == nil {
		return
	}
	version, _ := strconv.Atoi(in.get("version"))
	out, err := s.issues.Restore(r.Context(), s.cfg.Topics.Current(), is, version, n)
	if errors.Is(err, issues.ErrNoVersion) {
		webjson.Write(w, http.StatusNotFound, errorBody(err.Error()))
		return
	}
	if err != nil {
		s.storeFailed(w, "restore the version", err)
		return
	}
	s.note(r, audit.IssueRestored, audit.Issue(is.ID), "version "+strconv.Itoa(n))
	webjson.Write(w, http.StatusOK, out)
}

// issueInput reads an issue's fields, flds (issueFields, and more for
// some routes; the body may be up to issues.MaxBody), and checks them;
// it answers a bad one itself. in holds every field read.
func (s *Server) issueInput(w http.ResponseWriter, r *http.Request, flds fields) (c store.IssueContent, in input, ok bool) {
	// A declared length over the cap is answered before any read (no
	// 100 Continue); a longer body than declared is cut at the cap.
	err := httpbody.Limit(w, r, issues.MaxBody+16<<10)
	if err == nil {
		in, err = decodeJSON(r.Body, flds)
	}
	if httpbody.IsTooLarge(err) {
		webjson.Write(w, http.StatusRequestEntityTooLarge, errorBody("request body too large"))
		return c, in, false
	}
	if err != nil {
		var fe fieldError
		if !errors.As(err, &fe) {
			err = errors.New("unreadable body")
		}
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return c, in, false
	}
	c = store.IssueContent{Subject: strings.TrimSpace(in.get("subject")), Preheader: strings.TrimSpace(in.get("preheader")),
		Body: in.get("body"), Topics: in["topics"], ReplyTo: issues.NormalizeReplyTo(in.get("reply_to"))}
	if name := in.get("segment"); name != "" {
		// By id or by name; the issue keeps the id, so a renamed
		// segment stays its audience.
		seg, err := s.deps.Store.GetSegment(r.Context(), name)
		if errors.Is(err, store.ErrNoSegment) {
			webjson.Write(w, http.StatusBadRequest, errorBody("segment: no segment "+webjson.Quote(name)))
			return c, in, false
		}
		if err != nil {
			s.storeFailed(w, "read the segment", err)
			return c, in, false
		}
		c.Segment = seg.ID
	}
	if err := issues.CheckContent(s.cfg.Topics.Current(), c); err != nil {
		s.storeFailed(w, "check the issue", err)
		return c, in, false
	}
	return c, in, true
}

func (s *Server) storeFailed(w http.ResponseWriter, what string, err error) {
	var bad *issues.InputError
	var changed *issues.AudienceChangedError
	var rate *issues.TestRateError
	var clipped *issues.ClippedError
	var checks *issues.ChecksError
	switch {
	case errors.As(err, &checks):
		webjson.Write(w, http.StatusConflict, map[string]any{"error": err.Error(), "checks": checks.Failed})
	case errors.As(err, &bad):
		webjson.Write(w, http.StatusBadRequest, errorBody(bad.Msg))
	case errors.As(err, &clipped):
		webjson.Write(w, http.StatusConflict, map[string]any{"error": err.Error(), "html_bytes": clipped.Bytes})
	case errors.Is(err, issues.ErrTooLarge):
		webjson.Write(w, http.StatusRequestEntityTooLarge, errorBody(err.Error()))
	case errors.Is(err, store.ErrNoIssue):
		webjson.Write(w, http.StatusNotFound, errorBody("no such issue"))
	case errors.Is(err, store.ErrIssueState), errors.Is(err, issues.ErrNoReaders), errors.Is(err, settings.ErrNoPostalAddress):
		webjson.Write(w, http.StatusConflict, errorBody(err.Error()))
	case errors.Is(err, store.ErrSlugTaken):
		webjson.Write(w, http.StatusConflict, errorBody("slug: another issue has this slug; choose another"))
	case errors.Is(err, store.ErrIssueStale):
		webjson.Write(w, http.StatusConflict, errorBody("the issue changed since you opened it; read it again"))
	case errors.As(err, &changed):
		webjson.Write(w, http.StatusConflict, map[string]any{"error": err.Error(), "audience": changed.Now})
	case errors.Is(err, issues.ErrTestRecipient):
		webjson.Write(w, http.StatusForbidden, errorBody(err.Error()))
	case errors.As(err, &rate):
		w.Header().Set("Retry-After", strconv.Itoa(int(rate.RetryAfter.Seconds()+0.999)))
		webjson.Write(w, http.StatusTooManyRequests, errorBody(err.Error()))
	default:
		s.deps.Log.Error(what, "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not "+what))
	}
}

func (s *Server) createIssue(w http.ResponseWriter, r *http.Request) {
	c, _, ok := s.issueInput(w, r, issueFields)
	if !ok {
		return
	}
	is, err := s.deps.Issues.CreateIssue(r.Context(), c, "")
	if err != nil {
		s.storeFailed(w, "store the issue", err)
		return
	}
	s.note(r, audit.IssueCreated, audit.Issue(is.ID), is.Slug)
	out := map[string]any{"id": is.ID, "slug": is.Slug, "status": is.Status}
	if warn := issues.BodyWarnings(is.Body); warn != nil {
		out["warnings"] = warn
	}
	webjson.Write(w, http.StatusCreated, out)
}

// issueOf loads the issue of the route's {id}; it answers a bad or
// unknown one itself.
func (s *Server) issueOf(w http.ResponseWriter, r *http.Request) (store.Issue, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		webjson.Write(w, http.StatusNotFound, errorBody("no such issue"))
		return store.Issue{}, false
	}
	is, err := s.deps.Issues.Issue(r.Context(), id)
	if err != nil {
		s.storeFailed(w, "load the issue", err)
		return is, false
	}
	return is, true
}

func (s *Server) getIssue(w http.ResponseWriter, r *http.Request) {
	if is, ok := s.issueOf(w, r); ok {
		webjson.Write(w, http.StatusOK, is)
	}
}

// putIssue handles PUT /api/issues/{id}: with "version" (the one the
// writer read), a save over a later one is refused (409), nothing lost.
func (s *Server) putIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	if !store.Editable(is.Status) {
		msg := "only a draft or scheduled issue can change; this one is " + is.Status
		if is.Status == store.IssueSent {
			// Its archive page is public: links to it must keep working.
			msg += " (its slug stays too: /archive/" + is.Slug + " is a public address)"
		}
		webjson.Write(w, http.StatusConflict, errorBody(msg))
		return
	}
	c, in, ok := s.issueInput(w, r, putIssueFields)
	if !ok {
		return
	}
	version, _ := strconv.Atoi(in.get("version"))
	slug, was := in.get("slug"), is.Slug
	is, err := s.issues.UpdateSlug(r.Context(), s.cfg.Topics.Current(), is, version, c, slug)
	if err != nil {
		s.storeFailed(w, "store the issue", err)
		return
	}
	detail := ""
	if is.Slug != was {
		detail = "slug " + was + " → " + is.Slug
	}
	s.note(r, audit.IssueUpdated, audit.Issue(is.ID), detail)
	webjson.Write(w, http.StatusOK, savedIssue{Issue: is, Warnings: issues.BodyWarnings(is.Body)})
}

// savedIssue is the answer to a save: the issue, and what the publisher
// should hear of what was saved (issues.BodyWarnings).
type savedIssue struct {
	store.Issue
	Warnings []string `json:"warnings,omitempty"`
}

func (s *Server) previewIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	ct, body, err := issues.Preview(r.Context(), s.deps.IssueRenderer, is, r.URL.Query().Get("topic"), r.URL.Query().Get("format"))
	var bad *issues.InputError
	if errors.As(err, &bad) {
		webjson.Write(w, http.StatusBadRequest, errorBody(bad.Msg))
		return
	}
	if err != nil {
		s.deps.Log.Error("preview issue", "issue", is.ID, "err", err)
		webjson.Write(w, http.StatusInternalServerError, errorBody("could not render the issue: "+err.Error()))
		return
	}
	// The size of the HTML part as readers get it, and the warning near
	// Gmail's clip (issues.SizeWarning), in headers: the body is the mail.
	if n, err := s.deps.IssueRenderer.HTMLSize(r.Context(), is); err == nil {
		w.Header().Set("X-Issue-Html-Bytes", strconv.Itoa(n))
		if warn := issues.SizeWarning(n); warn != "" {
			w.Header().Set("X-Issue-Size-Warning", warn)
		}
	}
	w.Header().Set("Content-Type", ct)
	// A preview is the publisher's to read, not a page to run: no script
	// runs in it, and it is not framed by others.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; img-src * data:; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
}

// testIssue handles POST /api/issues/{id}/test: the addresses are
// checked against the test gate (the account's own address and
// NEWSLETTER_TEST_RECIPIENTS; 403 otherwise) and its allowance (429),
// and the audit names each by its keyed hash.
func (s *Server) testIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	in := s.readAdminJSON(w, r, testFields, false)
	if in == nil {
		return
	}
	emails, err := issues.CheckTestEmails(in["emails"])
	if err == nil {
		err = s.deps.TestGate.Allow(principalName(r), emails, s.newsletter(r).TestRecipients)
	}
	if err != nil {
		s.storeFailed(w, "test-send the issue", err)
		return
	}
	if err := s.deps.IssueRenderer.SendTest(r.Context(), is, emails); err != nil {
		s.deps.Log.Error("test-send issue", "issue", is.ID, "err", err)
		webjson.Write(w, http.StatusBadGateway, errorBody("the test mail was not sent: "+err.Error()))
		return
	}
	s.note(r, audit.IssueTestSent, audit.Issue(is.ID), s.TestSendDetail(emails))
	webjson.Write(w, http.StatusOK, map[string]any{"sent": len(emails)})
}

// TestSendDetail is the audit's detail of a test send: each address by
// its keyed hash, never the address.
func (s *Server) TestSendDetail(emails []string) string {
	if s.deps.Audit == nil {
		return fmt.Sprintf("to %d addresses", len(emails))
	}
	hashes := make([]string, len(emails))
	for i, e := range emails {
		hashes[i] = s.deps.Audit.Subscriber(e)
	}
	return "to " + strings.Join(hashes, ", ")
}

// principalName is the name of the account the guard let in ("" when
// none).
func principalName(r *http.Request) string {
	p, _ := adminauth.FromContext(r.Context())
	return p.Name
}

// issueAudience handles GET /api/issues/{id}/audience: how many readers
// a send would reach now.
func (s *Server) issueAudience(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	n, err := s.issues.Audience(r.Context(), is)
	if err != nil {
		s.storeFailed(w, "count the audience", err)
		return
	}
	webjson.Write(w, http.StatusOK, map[string]any{"id": is.ID, "audience": n})
}

// issueAction handles POST /api/issues/{id}/pause, resume, reschedule,
// unschedule and cancel.
func (s *Server) issueAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		is, ok := s.issueOf(w, r)
		if !ok {
			return
		}
		var when issues.When
		if action == "reschedule" {
			in := s.readAdminJSON(w, r, whenFields, false)
			if in == nil {
				return
			}
			when = issues.When{At: in.get("at"), LocalTime: in.get("local_time")}
		}
		was := is.Status
		is, err := issues.Change(r.Context(), s.issues, is, action, when)
		if err != nil {
			s.storeFailed(w, "change the issue", err)
			return
		}
		detail := was + " → " + is.Status
		if action == "reschedule" {
			detail += ", " + when.Detail()
		}
		s.note(r, issues.ActionAudit(action), audit.Issue(is.ID), detail)
		webjson.Write(w, http.StatusOK, map[string]any{"id": is.ID, "status": is.Status})
	}
}

func (s *Server) issueProgress(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	p, err := s.deps.Issues.IssueProgress(r.Context(), is.ID)
	if err != nil {
		s.storeFailed(w, "count the issue", err)
		return
	}
	webjson.Write(w, http.StatusOK, p)
}

// issueReport handles GET /api/issues/{id}/report: the issue's report
// (issues.Report) as JSON, or with ?format=csv its links and totals as
// CSV (issues.WriteReportCSV). An issue not sent yet has a report of
// zeros.
func (s *Server) issueReport(w http.ResponseWriter, r *http.Request) {
	format := r.URL.Query().Get("format")
	if format != "" && format != "json" && format != "csv" {
		webjson.Write(w, http.StatusBadRequest, errorBody("format: json or csv"))
		return
	}
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	rep, err := issues.BuildReport(r.Context(), s.deps.Issues, s.deps.Engagement, is)
	if err != nil {
		s.storeFailed(w, "report the issue", err)
		return
	}
	if format != "csv" {
		webjson.Write(w, http.StatusOK, rep)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="issue-%d-report.csv"`, is.ID))
	if err := issues.WriteReportCSV(w, rep); err != nil {
		// The status is out already: the reader sees a cut file.
		s.deps.Log.Warn("issue report: write the CSV", "issue", is.ID, "err", err)
	}
}

// WithIssues is d serving /api/issues from st, rendered by r (a nil r:
// no issue routes, as on an API process without a mail renderer).
func (d Deps) WithIssues(st IssueStore, r issues.Renderer) Deps {
	if r != nil {
		d.Issues, d.IssueRenderer = st, r
	}
	return d
}
