package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/topics"
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
	// Readers of the issues (viewer) and their writers (editor), as
	// the reference's table of roles says.
	v := func(h http.HandlerFunc) http.Handler { return s.Viewer(h) }
	e := func(h http.HandlerFunc) http.Handler { return s.Editor(h) }
	s.mux.Handle("POST /api/issues", e(s.createIssue))
	s.mux.Handle("GET /api/issues", v(s.listIssues))
	s.mux.Handle("GET /api/issues/{id}", v(s.getIssue))
	s.mux.Handle("PUT /api/issues/{id}", e(s.putIssue))
	s.mux.Handle("GET /api/issues/{id}/preview", v(s.previewIssue))
	s.mux.Handle("POST /api/issues/{id}/test", e(s.testIssue))
	s.mux.Handle("POST /api/issues/{id}/send", e(s.sendIssue))
	for _, action := range IssueActions {
		s.mux.Handle("POST /api/issues/{id}/"+action, e(s.issueAction(action)))
	}
	s.mux.Handle("GET /api/issues/{id}/progress", v(s.issueProgress))
}

// issueBody reads an issue's fields (the body may be up to
// MaxIssueBody) and checks them; it answers a bad one itself.
func (s *Server) issueBody(w http.ResponseWriter, r *http.Request) (store.IssueContent, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxIssueBody+16<<10)
	in, err := decodeJSON(r.Body, issueFields)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		WriteJSON(w, http.StatusRequestEntityTooLarge, errorBody("request body too large"))
		return store.IssueContent{}, false
	}
	if err != nil {
		var fe fieldError
		if !errors.As(err, &fe) {
			err = errors.New("unreadable body")
		}
		WriteJSON(w, http.StatusBadRequest, errorBody(err.Error()))
		return store.IssueContent{}, false
	}
	c := store.IssueContent{Subject: strings.TrimSpace(in.get("subject")), Preheader: strings.TrimSpace(in.get("preheader")),
		Body: in.get("body"), Topics: in["topics"]}
	if err := CheckIssue(s.cfg.Topics, c); err != nil {
		s.storeFailed(w, "check the issue", err)
		return c, false
	}
	return c, true
}

// ErrIssueTooLarge is an issue whose body is over MaxIssueBody (413).
var ErrIssueTooLarge = fmt.Errorf("the body is over %d bytes", MaxIssueBody)

// IssueInputError is a bad field of an issue or a send: the caller's to
// fix (400), and nothing changed.
type IssueInputError struct{ Msg string }

func (e *IssueInputError) Error() string { return e.Msg }

func badIssue(format string, a ...any) error { return &IssueInputError{Msg: fmt.Sprintf(format, a...)} }

// CheckIssue is the one check of an issue's content, for the API and the
// commands alike: nil, ErrIssueTooLarge or an *IssueInputError.
func CheckIssue(known *topics.Set, c store.IssueContent) error {
	if len(c.Body) > MaxIssueBody {
		return ErrIssueTooLarge
	}
	switch {
	case c.Subject == "" || len([]rune(c.Subject)) > MaxIssueSubject || strings.ContainsAny(c.Subject, "\r\n"):
		return badIssue("subject: one line of 1 to %d characters", MaxIssueSubject)
	case len([]rune(c.Preheader)) > MaxIssueSubject || strings.ContainsAny(c.Preheader, "\r\n"):
		return badIssue("preheader: one line of at most %d characters", MaxIssueSubject)
	case len(c.Topics) == 0:
		return badIssue("topics: name at least one topic")
	}
	for _, t := range c.Topics {
		if _, ok := known.Topic(t); !ok {
			return badIssue("topics: unknown topic %q", t)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(c.Topics)))) != len(c.Topics) {
		return badIssue("topics: a topic is named twice")
	}
	return nil
}

// SendRequest is how a send is asked for: both empty is now; At an RFC
// 3339 time in the future; LocalTime an hour HH:MM in each reader's zone.
type SendRequest struct{ At, LocalTime string }

// Detail says when the send was asked for, as the audit log records it.
func (r SendRequest) Detail() string {
	switch {
	case r.At != "":
		return "at " + r.At
	case r.LocalTime != "":
		return "at " + r.LocalTime + " local time"
	}
	return "now"
}

// SendIssue moves the draft id to sending (or scheduled) and queues its
// plan, for the API and the commands alike. The plan's outbox entry is
// written in the same step as the status, so a crash or a failed enqueue
// leaves it to the relay, never an issue "sending" that nobody plans.
// Errors: *IssueInputError (nothing changed), store.ErrNoIssue,
// store.ErrIssueState (not a draft: nothing changed), or the store's.
func SendIssue(ctx context.Context, st store.Issues, jobs JobDispatcher, log *slog.Logger, id int64, req SendRequest, now time.Time) (store.Issue, error) {
	ch := store.IssueChange{}
	to, due := store.IssueSending, now
	switch at, lt := req.At, req.LocalTime; {
	case at != "" && lt != "":
		return store.Issue{}, badIssue("give at or local_time, not both")
	case at != "":
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return store.Issue{}, badIssue("at: an RFC 3339 time, e.g. 2026-01-05T09:00:00Z")
		}
		if !t.After(now) {
			return store.Issue{}, badIssue("at: a time in the future")
		}
		to, due, ch.SendAt = store.IssueScheduled, t, t
	case lt != "":
		if _, err := time.Parse("15:04", lt); err != nil || len(lt) != 5 {
			return store.Issue{}, badIssue("local_time: an hour HH:MM, e.g. 09:00")
		}
		ch.LocalTime = lt
	}
	is, err := st.Issue(ctx, id)
	if err != nil {
		return is, err
	}
	return transitionAndPlan(ctx, st, jobs, log, is, []string{store.IssueDraft}, to, ch, due)
}

// transitionAndPlan moves is to to with its plan's outbox entry (for the
// round the change leaves it in) and dispatches the plan. A failed
// enqueue is no failure: the entry stays and the relay enqueues it.
func transitionAndPlan(ctx context.Context, st store.Issues, jobs JobDispatcher, log *slog.Logger, is store.Issue, from []string, to string, ch store.IssueChange, due time.Time) (store.Issue, error) {
	round := is.Round
	ch.Round = is.Round
	if ch.NewRound {
		round++
	}
	job := tasks.NewIssuePlan(is.ID, round, due)
	ch.Outbox = job.Outbox()
	is, err := st.TransitionIssue(ctx, is.ID, from, to, ch)
	if err != nil {
		return is, err
	}
	if _, err := jobs.Dispatch(ctx, job); err != nil {
		log.Warn("issue: plan not queued now; the relay queues it from the outbox", "issue", is.ID, "err", err)
	}
	return is, nil
}

func (s *Server) storeFailed(w http.ResponseWriter, what string, err error) {
	var bad *IssueInputError
	switch {
	case errors.As(err, &bad):
		WriteJSON(w, http.StatusBadRequest, errorBody(bad.Msg))
	case errors.Is(err, ErrIssueTooLarge):
		WriteJSON(w, http.StatusRequestEntityTooLarge, errorBody(err.Error()))
	case errors.Is(err, store.ErrNoIssue):
		WriteJSON(w, http.StatusNotFound, errorBody("no such issue"))
	case errors.Is(err, store.ErrIssueState):
		WriteJSON(w, http.StatusConflict, errorBody(err.Error()))
	default:
		s.deps.Log.Error(what, "err", err)
		WriteJSON(w, http.StatusServiceUnavailable, errorBody("could not "+what))
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
	s.note(r, audit.IssueCreated, audit.Issue(is.ID), is.Slug)
	WriteJSON(w, http.StatusCreated, map[string]any{"id": is.ID, "slug": is.Slug, "status": is.Status})
}

func (s *Server) listIssues(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !slices.Contains(store.IssueStatuses, status) {
		WriteJSON(w, http.StatusBadRequest, errorBody("status: one of "+strings.Join(store.IssueStatuses, ", ")))
		return
	}
	after, limit := int64(0), 20
	var err error
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			WriteJSON(w, http.StatusBadRequest, errorBody("after: an issue id"))
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxIssuePage {
			WriteJSON(w, http.StatusBadRequest, errorBody(fmt.Sprintf("limit: 1 to %d", maxIssuePage)))
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
	WriteJSON(w, http.StatusOK, out)
}

// issueOf loads the issue of the route's {id}; it answers a bad or
// unknown one itself.
func (s *Server) issueOf(w http.ResponseWriter, r *http.Request) (store.Issue, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		WriteJSON(w, http.StatusNotFound, errorBody("no such issue"))
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
		WriteJSON(w, http.StatusOK, is)
	}
}

func (s *Server) putIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	if !store.Editable(is.Status) {
		WriteJSON(w, http.StatusConflict, errorBody("only a draft or scheduled issue can change; this one is "+is.Status))
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
	s.note(r, audit.IssueUpdated, audit.Issue(is.ID), "")
	WriteJSON(w, http.StatusOK, is)
}

func (s *Server) previewIssue(w http.ResponseWriter, r *http.Request) {
	is, ok := s.issueOf(w, r)
	if !ok {
		return
	}
	ct, body, err := PreviewIssue(r.Context(), s.deps.IssueRenderer, is, r.URL.Query().Get("topic"), r.URL.Query().Get("format"))
	var bad *IssueInputError
	if errors.As(err, &bad) {
		WriteJSON(w, http.StatusBadRequest, errorBody(bad.Msg))
		return
	}
	if err != nil {
		s.deps.Log.Error("preview issue", "issue", is.ID, "err", err)
		WriteJSON(w, http.StatusInternalServerError, errorBody("could not render the issue: "+err.Error()))
		return
	}
	w.Header().Set("Content-Type", ct)
	// A preview is the publisher's to read, not a page to run: no script
	// runs in it, and it is not framed by others.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; img-src * data:; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
}

// PreviewIssue is the preview of is for the API and the commands alike:
// topic "" is the issue's first, format "" is html; another topic than
// the issue's or another format is an *IssueInputError.
func PreviewIssue(ctx context.Context, r IssueRenderer, is store.Issue, topic, format string) (contentType string, body []byte, err error) {
	if topic == "" && len(is.Topics) > 0 {
		topic = is.Topics[0]
	}
	if format == "" {
		format = "html"
	}
	if !slices.Contains(is.Topics, topic) {
		return "", nil, badIssue("topic: one of the issue's topics (%s)", strings.Join(is.Topics, ", "))
	}
	if format != "html" && format != "text" && format != "eml" {
		return "", nil, badIssue("format: html, text or eml")
	}
	return r.Preview(ctx, is, topic, format)
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
	emails, err := CheckTestEmails(in["emails"])
	if err != nil {
		WriteJSON(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	if err := s.deps.IssueRenderer.SendTest(r.Context(), is, emails); err != nil {
		s.deps.Log.Error("test-send issue", "issue", is.ID, "err", err)
		WriteJSON(w, http.StatusBadGateway, errorBody("the test mail was not sent: "+err.Error()))
		return
	}
	s.note(r, audit.IssueTestSent, audit.Issue(is.ID), fmt.Sprintf("to %d addresses", len(emails)))
	WriteJSON(w, http.StatusOK, map[string]any{"sent": len(emails)})
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
	req := SendRequest{At: in.get("at"), LocalTime: in.get("local_time")}
	is, err := SendIssue(r.Context(), s.deps.Issues, s.deps.Jobs, s.deps.Log, is.ID, req, s.deps.Now())
	if err != nil {
		s.storeFailed(w, "send the issue", err)
		return
	}
	s.note(r, audit.IssueSent, audit.Issue(is.ID), req.Detail())
	WriteJSON(w, http.StatusAccepted, map[string]any{"id": is.ID, "status": is.Status})
}

// issueAction handles POST /api/issues/{id}/pause, resume and cancel.
func (s *Server) issueAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		is, ok := s.issueOf(w, r)
		if !ok {
			return
		}
		is, err := ChangeIssue(r.Context(), s.deps.Issues, s.deps.Jobs, s.deps.Log, is, action, s.deps.Now())
		if err != nil {
			s.storeFailed(w, "change the issue", err)
			return
		}
		s.note(r, IssueActionAudit(action), audit.Issue(is.ID), "")
		WriteJSON(w, http.StatusOK, map[string]any{"id": is.ID, "status": is.Status})
	}
}

// IssueActions are the changes of a sending (or scheduled) issue besides
// the send itself, in the order the pages offer them.
var IssueActions = []string{"pause", "resume", "cancel"}

// issueMoves are what each of IssueActions does: the status it leads to,
// the statuses it may leave, whether it plans again (a resume plans the
// rest in a new round), and the audit log's name for it.
var issueMoves = map[string]struct {
	to       string
	newRound bool
	from     []string
	audit    string
}{
	"pause":  {store.IssuePaused, false, []string{store.IssueSending, store.IssueScheduled}, audit.IssuePaused},
	"resume": {store.IssueSending, true, []string{store.IssuePaused}, audit.IssueResumed},
	"cancel": {store.IssueCancelled, false, []string{store.IssueDraft, store.IssueScheduled, store.IssueSending, store.IssuePaused}, audit.IssueCancelled},
}

// IssueActionAudit is the audit log's name of action (one of
// IssueActions).
func IssueActionAudit(action string) string { return issueMoves[action].audit }

// ChangeIssue pauses, resumes or cancels issue is, as its caller just
// read it (action: one of IssueActions), for the API and the console
// alike. The status it may leave is checked again in the store's step.
// Errors: an *IssueInputError for an unknown action, store.ErrNoIssue,
// store.ErrIssueState (nothing changed), or the store's.
func ChangeIssue(ctx context.Context, st store.Issues, jobs JobDispatcher, log *slog.Logger, is store.Issue, action string, now time.Time) (store.Issue, error) {
	move, ok := issueMoves[action]
	if !ok {
		return store.Issue{}, badIssue("action: one of %s", strings.Join(IssueActions, ", "))
	}
	ch := store.IssueChange{NewRound: move.newRound, SendAt: is.SendAt, LocalTime: is.LocalTime}
	if move.newRound {
		return transitionAndPlan(ctx, st, jobs, log, is, move.from, move.to, ch, now)
	}
	return st.TransitionIssue(ctx, is.ID, move.from, move.to, ch)
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
	WriteJSON(w, http.StatusOK, p)
}

// CheckTestEmails is the one check of a test send's addresses, for the
// API and the console alike: 1 to MaxTestEmails addresses, each
// normalised, or an *IssueInputError.
func CheckTestEmails(emails []string) ([]string, error) {
	if len(emails) == 0 || len(emails) > MaxTestEmails {
		return nil, badIssue("emails: 1 to %d addresses", MaxTestEmails)
	}
	out := make([]string, len(emails))
	for i, e := range emails {
		n, err := address.Normalize(e)
		if err != nil {
			return nil, badIssue("emails: %q: %v", e, err)
		}
		out[i] = n
	}
	return out, nil
}

// WithIssues is d serving /api/issues from st, rendered by r (a nil r:
// no issue routes, as on an API process without a mail renderer).
func (d Deps) WithIssues(st IssueStore, r IssueRenderer) Deps {
	if r != nil {
		d.Issues, d.IssueRenderer = st, r
	}
	return d
}
