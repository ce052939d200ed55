package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/httpbody"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// maxBounceReport bounds a POST /webhooks/bounce as the providers'
// webhooks are bounded (feedback.MaxWebhookBody, 1 MiB).
const maxBounceReport = 1 << 20

// feedbackRoutes mounts the generic bounce webhook (admin token) and the
// suppression list. The providers' webhooks are the e-mail channel's
// (feedback.WebhookHandler), mounted by the binary.
func (s *Server) feedbackRoutes() {
	s.mux.Handle("POST /webhooks/bounce", s.Admin(http.HandlerFunc(s.reportBounce)))
	s.mux.Handle("GET /api/suppressions", s.Viewer(http.HandlerFunc(s.listSuppressions)))
	s.mux.Handle("DELETE /api/suppressions/{email}", s.Admin(http.HandlerFunc(s.liftSuppression)))
}

// reportBounce is POST /webhooks/bounce, for any other sender (behind the
// admin token): {"email","type":"hard"|"soft"|"complaint","reason","id"}.
// Without an id a report is not deduplicated. It enqueues a feedback task,
// which the worker applies, and records the report in the audit; the
// queue down: 503.
func (s *Server) reportBounce(w http.ResponseWriter, r *http.Request) {
	err := httpbody.Limit(w, r, maxBounceReport)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(r.Body)
	}
	if err != nil {
		webjson.Write(w, http.StatusRequestEntityTooLarge, errorBody("body too large"))
		return
	}
	ev, err := bounceReport(body)
	if err != nil {
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	ev.Source = "api"
	task, err := tasks.NewFeedback(ev)
	if err != nil {
		// As a provider's unusable event: skipped, the report answered.
		s.deps.Log.Info("webhook event skipped", "source", ev.Source, "err", logredact.Clip(err.Error()))
	} else {
		_, err = s.deps.Queue.EnqueueContext(r.Context(), task)
		if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) && !errors.Is(err, asynq.ErrDuplicateTask) {
			s.deps.Log.Error("webhook: could not queue an event", "source", ev.Source, "err", err)
			webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not queue the events, please retry"))
			return
		}
	}
	s.noteSubscriber(r, audit.BounceReported, ev.Email, ev.Type)
	webjson.Write(w, http.StatusOK, map[string]int{"queued": 1})
}

// bounceReport reads a POST /webhooks/bounce's body.
func bounceReport(body []byte) (tasks.FeedbackPayload, error) {
	in, err := decodeJSON(bytes.NewReader(body), bounceFields)
	var fe fieldError
	if errors.As(err, &fe) {
		return tasks.FeedbackPayload{}, fe
	}
	if err != nil {
		return tasks.FeedbackPayload{}, errors.New("want JSON {\"email\",\"type\",\"reason\",\"id\"}")
	}
	email, err := address.Normalize(in.get("email"))
	if err != nil {
		return tasks.FeedbackPayload{}, err
	}
	typ := in.get("type")
	if !store.FeedbackType(typ).Valid() {
		return tasks.FeedbackPayload{}, errors.New(`type must be "hard", "soft" or "complaint"`)
	}
	id := ""
	if v := in.get("id"); v != "" {
		id = "api-" + v
	}
	return tasks.FeedbackPayload{ID: id, Email: email, Type: typ, Reason: in.get("reason")}, nil
}

// listSuppressions handles GET /api/suppressions?reason=&after=&limit=.
func (s *Server) listSuppressions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := store.Status(q.Get("reason"))
	if status != "" && status != store.Bounced && status != store.Complained {
		webjson.Write(w, http.StatusBadRequest, errorBody("reason must be bounced or complained"))
		return
	}
	after, err := strconv.ParseInt(q.Get("after"), 10, 64)
	if q.Get("after") == "" {
		after, err = 0, nil
	}
	limit, lerr := strconv.Atoi(q.Get("limit"))
	if q.Get("limit") == "" {
		limit, lerr = 100, nil
	}
	if err != nil || after < 0 || lerr != nil || limit < 1 || limit > 1000 {
		webjson.Write(w, http.StatusBadRequest, errorBody("after is a subscriber id; limit 1 to 1000"))
		return
	}
	subs, err := s.deps.Store.Suppressed(r.Context(), status, after, limit)
	if err != nil {
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
		return
	}
	out := struct {
		Suppressions []subscriberView `json:"suppressions"`
		// Next is the after of the next page; 0 on the last.
		Next int64 `json:"next"`
	}{Suppressions: []subscriberView{}}
	for _, sub := range subs {
		out.Suppressions = append(out.Suppressions, viewOf(sub))
	}
	if len(subs) == limit {
		out.Next = subs[len(subs)-1].ID
	}
	webjson.Write(w, http.StatusOK, out)
}

// liftSuppression handles DELETE /api/suppressions/{email}.
func (s *Server) liftSuppression(w http.ResponseWriter, r *http.Request) {
	email, ok := pathAddress(w, r)
	if !ok {
		return
	}
	sub, err := s.deps.Store.LiftSuppression(r.Context(), email)
	switch {
	case errors.Is(err, store.ErrNotFound):
		webjson.Write(w, http.StatusNotFound, errorBody("no subscriber "+email))
	case errors.Is(err, store.ErrNotSuppressed):
		webjson.Write(w, http.StatusConflict, errorBody(email+" is not suppressed"))
	case err != nil:
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
	default:
		s.deps.Log.Warn("suppression lifted by hand", "subscriber", sub.ID, "domain", address.Domain(email), "now", sub.Status)
		s.noteSubscriber(r, audit.SuppressionLifted, email, "now "+string(sub.Status))
		webjson.Write(w, http.StatusOK, viewOf(sub))
	}
}
