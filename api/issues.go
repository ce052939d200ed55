package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// IssueRenderer renders and test-sends issues. The API never imports the
// mailer: the binary injects one built on the worker's renderer, links and
// mailer, so a preview is the very mail a reader gets.
type IssueRenderer interface {
	// Preview is the mail of is as a reader of topic gets it (personal
	// links for a sample reader): format html, text or eml.
	Preview(ctx context.Context, is store.Issue, topic, format string) (contentType string, body []byte, err error)
	// SendTest mails is now to each address through the real path,
	// subject prefixed "[Test] ", not counted, its personal links inert.
	SendTest(ctx context.Context, is store.Issue, emails []string) error
}

// IssueStore is the store's side of issues the API uses.
type IssueStore interface {
	store.Issues
}

// The limits of an issue (the reference lists them).
const (
	MaxIssueBody    = 512 << 10
	MaxIssueSubject = 200
	MaxTestEmails   = 10
	maxIssuePage    = 100
)

var (
	issueFields = fields{"subject": textField, "preheader": textField, "body": textField, "topics": listField}
	sendFields  = fields{"at": textField, "local_time": textField}
	testFields  = fields{"emails": listField}
)

func (s *Server) issueRoutes() {
	if s.deps.Issues == nil {
		return
	}
	a := func(h http.HandlerFunc) http.Handler { return s.Admin(h) }
	s.mux.Handle("POST /api/issues", a(s.createIssue))
	s.mux.Handle("GET /api/issues", a(s.listIssues))
	s.mux.Handle("GET /api/issues/{id}", a(s.getIssue))
	s.mux.Handle("PUT /api/issues/{id}", a(s.putIssue))
	s.mux.Handle("GET /api/issues/{id}/preview", a(s.previewIssue))
	s.mux.Handle("POST /api/issues/{id}/test", a(s.testIssue))
	s.mux.Handle("POST /api/issues/{id}/send", a(s.sendIssue))
	s.mux.Handle("POST /api/issues/{id}/pause", a(s.issueAction(store.IssuePaused, false, store.IssueSending, store.IssueScheduled)))
	s.mux.Handle("POST /api/issues/{id}/resume", a(s.issueAction(store.IssueSending, true, store.IssuePaused)))
	s.mux.Handle("POST /api/issues/{id}/cancel", a(s.issueAction(store.IssueCancelled, false,
		store.IssueDraft, store.IssueScheduled, store.IssueSending, store.IssuePaused)))
	s.mux.Handle("GET /api/issues/{id}/progress", a(s.issueProgress))
}

// issueBody reads an issue's fields (the body may be up to
// MaxIssueBody) and checks them; it answers a bad one itself.
func (s *Server) issueBody(w http.ResponseWriter, r *http.Request) (store.IssueContent, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxIssueBody+16<<10)
	in, err := decodeJSON(r.Body, issueFields)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeJSON(w, http.StatusRequestEntityTooLarge, errorBody("request body too large"))
		return store.IssueContent{}, false
	}
	if err != nil {
		var fe fieldError
		if !errors.As(err, &fe) {
			err = errors.New("unreadable body")
		}
		writeJSON(w, http.StatusBadRequest, errorBody(err.Error()))
		return store.IssueContent{}, false
	}
	c := store.IssueContent{Subject: strings.TrimSpace(in.get("subject")), Preheader: strings.TrimSpace(in.get("preheader")),
		Body: in.get("body"), Topics: in["topics"]}
	if len(c.Body) > MaxIssueBody {
		writeJSON(w, http.StatusRequestEntityTooLarge, errorBody(fmt.Sprintf("the body is over %d bytes", MaxIssueBody)))
		return c, false
	}
	if msg := s.checkIssue(c); msg != "" {
		writeJSON(w, http.StatusBadRequest, errorBody(msg))
		return c, false
	}
	return c, true
}

// checkIssue names what is wrong with c ("" : nothing).
func (s *Server) checkIssue(c store.IssueContent) string {
	switch {
	case c.Subject == "" || len([]rune(c.Subject)) > MaxIssueSubject || strings.ContainsAny(c.Subject, "\r\n"):
		return fmt.Sprintf("subject: one line of 1 to %d characters", MaxIssueSubject)
	case len([]rune(c.Preheader)) > MaxIssueSubject || strings.ContainsAny(c.Preheader, "\r\n"):
		return fmt.Sprintf("preheader: one line of at most %d characters", MaxIssueSubject)
	case len(c.Topics) == 0:
		return "topics: name at least one topic"
	}
	for _, t := range c.Topics {
		if _, ok := s.cfg.Topics.Topic(t); !ok {
			return fmt.Sprintf("topics: unknown topic %q", t)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(c.Topics)))) != len(c.Topics) {
		return "topics: a topic is named twice"
	}
	return ""
}

func (s *Server) storeFailed(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, store.ErrNoIssue):
		writeJSON(w, http.StatusNotFound, errorBody("no such issue"))
	case errors.Is(err, store.ErrIssueState):
		writeJSON(w, http.StatusConflict, errorBody(err.Error()))
	default:
		s.deps.Log.Error(what, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, errorBody("could not "+what))
	}
}

func (s *Server) createIssue(w http.ResponseWriter, r *http.Request) {
	c, ok := s.issueBody(w, r)
	if !ok {
		return
	}
	is, err := s.deps.Issues.CreateIssue(r.Context(), c, "")
	if err != nil {
		s.storeFailed(w, "store the issue", err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"id": is.ID, "slug": is.Slug, "status": is.Status})
}

func (s *Server) listIssues(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !slices.Contains(store.IssueStatuses, status) {
		writeJSON(w, http.StatusBadRequest, errorBody("status: one of "+strings.Join(store.IssueStatuses, ", ")))
		return
	}
	after, limit := int64(0), 20
	var err error
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			writeJSON(w, http.StatusBadRequest, errorBody("after: an issue id"))
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxIssuePage {
			writeJSON(w, http.StatusBadRequest, errorBody(fmt.Sprintf("limit: 1 to %d", maxIssuePage)))
			return
		}
	}
	list, err := s.deps.Issues.ListIssues(r.Context(), status, after, limit)
	if err != nil {
		s.storeFailed(w, "list issues", err)
		return
	}
	out := map[string]any{"issues": list}
	if len(list) == limit {
		out["next"] = strconv.FormatInt(list[len(list)-1].ID, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

// issueOf loads the issue of the route's {id}; it answers a bad or
// unknown one itself.
func (s *Server) issueOf(w http.ResponseWriter, r *http.Request) (store.Issue, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeJSON(w, http.StatusNotFound, errorBody("no such issue"))
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
		writeJSON(w, http.StatusOK, is)
	}
}

func (s *Server) putIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	if !store.Editable(is.Status) {
		writeJSON(w, http.StatusConflict, errorBody("only a draft or scheduled issue can change; this one is "+is.Status))
		return
	}
	c, ok := s.issueBody(w, r)
	if !ok {
		return
	}
	is, err := s.deps.Issues.UpdateIssue(r.Context(), is.ID, c)
	if err != nil {
		s.storeFailed(w, "store the issue", err)
		return
	}
	writeJSON(w, http.StatusOK, is)
}

func (s *Server) previewIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	topic, format := r.URL.Query().Get("topic"), r.URL.Query().Get("format")
	if topic == "" {
		topic = is.Topics[0]
	}
	if format == "" {
		format = "html"
	}
	if !slices.Contains(is.Topics, topic) {
		writeJSON(w, http.StatusBadRequest, errorBody(fmt.Sprintf("topic: one of the issue's topics (%s)", strings.Join(is.Topics, ", "))))
		return
	}
	if format != "html" && format != "text" && format != "eml" {
		writeJSON(w, http.StatusBadRequest, errorBody("format: html, text or eml"))
		return
	}
	ct, body, err := s.deps.IssueRenderer.Preview(r.Context(), is, topic, format)
	if err != nil {
		s.deps.Log.Error("preview issue", "issue", is.ID, "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody("could not render the issue: "+err.Error()))
		return
	}
	w.Header().Set("Content-Type", ct)
	// A preview is the publisher's to read, not a page to run: no script
	// runs in it, and it is not framed by others.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; img-src * data:; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
}

func (s *Server) testIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	in := s.readAdminJSON(w, r, testFields, false)
	if in == nil {
		return
	}
	emails := in["emails"]
	if len(emails) == 0 || len(emails) > MaxTestEmails {
		writeJSON(w, http.StatusBadRequest, errorBody(fmt.Sprintf("emails: 1 to %d addresses", MaxTestEmails)))
		return
	}
	for i, e := range emails {
		n, err := address.Normalize(e)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody(fmt.Sprintf("emails: %q: %v", e, err)))
			return
		}
		emails[i] = n
	}
	if err := s.deps.IssueRenderer.SendTest(r.Context(), is, emails); err != nil {
		s.deps.Log.Error("test-send issue", "issue", is.ID, "err", err)
		writeJSON(w, http.StatusBadGateway, errorBody("the test mail was not sent: "+err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sent": len(emails)})
}

func (s *Server) sendIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	in := s.readAdminJSON(w, r, sendFields, true)
	if in == nil {
		return
	}
	now := s.deps.Now()
	ch := store.IssueChange{}
	to, due := store.IssueSending, now
	switch at, lt := in.get("at"), in.get("local_time"); {
	case at != "" && lt != "":
		writeJSON(w, http.StatusBadRequest, errorBody("give at or local_time, not both"))
		return
	case at != "":
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody("at: an RFC 3339 time, e.g. 2026-01-05T09:00:00Z"))
			return
		}
		if !t.After(now) {
			writeJSON(w, http.StatusBadRequest, errorBody("at: a time in the future"))
			return
		}
		to, due, ch.SendAt = store.IssueScheduled, t, t
	case lt != "":
		if _, err := time.Parse("15:04", lt); err != nil || len(lt) != 5 {
			writeJSON(w, http.StatusBadRequest, errorBody("local_time: an hour HH:MM, e.g. 09:00"))
			return
		}
		ch.LocalTime = lt
	}
	is, err := s.deps.Issues.TransitionIssue(r.Context(), is.ID, []string{store.IssueDraft}, to, ch)
	if err != nil {
		s.storeFailed(w, "send the issue", err)
		return
	}
	if err := s.enqueuePlan(r.Context(), is, due); err != nil {
		// Nothing is queued: back to a draft, so the send can be asked again.
		if _, rerr := s.deps.Issues.TransitionIssue(r.Context(), is.ID, []string{to}, store.IssueDraft, store.IssueChange{}); rerr != nil {
			s.deps.Log.Error("issue left without a plan", "issue", is.ID, "err", rerr)
		}
		s.storeFailed(w, "queue the issue", err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"id": is.ID, "status": is.Status})
}

func (s *Server) enqueuePlan(ctx context.Context, is store.Issue, due time.Time) error {
	_, err := s.deps.Queue.EnqueueContext(ctx, tasks.NewIssuePlan(is.ID, is.Round, due))
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return err
	}
	return nil
}

// issueAction moves an issue to to from one of from (pause, resume,
// cancel); a resume plans the rest in a new round.
func (s *Server) issueAction(to string, newRound bool, from ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		is, ok := s.issueOf(w, r)
		if !ok {
			return
		}
		is, err := s.deps.Issues.TransitionIssue(r.Context(), is.ID, from, to, store.IssueChange{NewRound: newRound, SendAt: is.SendAt, LocalTime: is.LocalTime})
		if err != nil {
			s.storeFailed(w, "change the issue", err)
			return
		}
		if newRound {
			if err := s.enqueuePlan(r.Context(), is, s.deps.Now()); err != nil {
				s.storeFailed(w, "queue the issue", err)
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": is.ID, "status": is.Status})
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
	writeJSON(w, http.StatusOK, p)
}

// WithIssues is d serving /api/issues from st, rendered by r (a nil r:
// no issue routes, as on an API process without a mail renderer).
func (d Deps) WithIssues(st IssueStore, r IssueRenderer) Deps {
	if r != nil {
		d.Issues, d.IssueRenderer = st, r
	}
	return d
}
