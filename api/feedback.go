package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/email/feedback"
	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/httpbody"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// maxWebhookBody bounds a provider's request: SendGrid batches events.
const maxWebhookBody = 1 << 20

// feedbackRoutes mounts each configured provider's webhook, the generic
// one (admin token) and the suppression list.
func (s *Server) feedbackRoutes() {
	for name, wh := range s.deps.ProviderWebhooks {
		s.mux.HandleFunc("POST /webhooks/"+name, s.providerWebhook(name, wh))
	}
	s.mux.Handle("POST /webhooks/bounce", s.Admin(s.providerWebhook("api", genericWebhook{})))
	s.mux.Handle("GET /api/suppressions", s.Viewer(http.HandlerFunc(s.listSuppressions)))
	s.mux.Handle("DELETE /api/suppressions/{email}", s.Admin(http.HandlerFunc(s.liftSuppression)))
}

// providerWebhook verifies a provider's request (bounces and complaints
// coming in) and enqueues one feedback task per event; the worker applies
// them, so the provider gets its answer at once. Unverified: 401 and
// nothing queued. The queue down: 503, and the provider delivers again
// later.
func (s *Server) providerWebhook(source string, wh feedback.ProviderWebhook) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := httpbody.Limit(w, r, maxWebhookBody)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(r.Body)
		}
		if err != nil {
			webjson.Write(w, http.StatusRequestEntityTooLarge, errorBody("body too large"))
			return
		}
		events, err := wh.Events(r, body)
		if errors.Is(err, feedback.ErrUnauthorized) {
			s.deps.Log.Warn("webhook refused", "source", source, "err", logredact.Clip(err.Error()))
			// A provider's password (Postmark) or signing key (Mailgun)
			// is guessed online like the admin token: the same failure
			// budget per client slows it, and the provider itself, which
			// holds the secret, is never slowed.
			if tooMany := s.deps.Guard.Failed(r); tooMany != nil {
				w.Header().Set("Retry-After", tooMany.RetryAfterHeader())
				webjson.Write(w, http.StatusTooManyRequests, errorBody("too many unverified requests from this address: try again later"))
				return
			}
			webjson.Write(w, http.StatusUnauthorized, errorBody("not verified"))
			return
		}
		if errors.Is(err, feedback.ErrUnavailable) {
			s.deps.Log.Error("webhook: could not check the request", "source", source, "err", logredact.Clip(err.Error()))
			webjson.Write(w, http.StatusServiceUnavailable, errorBody("cannot check the request just now, please retry"))
			return
		}
		if err != nil {
			webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
			return
		}
		for _, ev := range events {
			if ev.Kind == feedback.KindTest {
				continue // about a test send: no subscriber's
			}
			ev.Source = source
			task, err := tasks.NewFeedback(tasks.FeedbackPayload(ev))
			if err != nil {
				// One unusable event (no address) must not make the
				// provider send the whole batch again.
				s.deps.Log.Info("webhook event skipped", "source", source, "err", logredact.Clip(err.Error()))
				continue
			}
			_, err = s.deps.Queue.EnqueueContext(r.Context(), task)
			if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) && !errors.Is(err, asynq.ErrDuplicateTask) {
				s.deps.Log.Error("webhook: could not queue an event", "source", source, "err", err)
				webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not queue the events, please retry"))
				return
			}
		}
		if source == "api" { // POST /webhooks/bounce, by a token's holder
			for _, ev := range events {
				if ev.Email != "" {
					s.noteSubscriber(r, audit.BounceReported, ev.Email, ev.Type)
				}
			}
		}
		webjson.Write(w, http.StatusOK, map[string]int{"queued": len(events)})
	}
}

// genericWebhook is POST /webhooks/bounce, for any other sender (behind
// the admin token): {"email","type":"hard"|"soft"|"complaint","reason","id"}.
// Without an id a report is not deduplicated.
type genericWebhook struct{}

func (genericWebhook) Events(_ *http.Request, body []byte) ([]feedback.Event, error) {
	in, err := decodeJSON(bytes.NewReader(body), bounceFields)
	var fe fieldError
	if errors.As(err, &fe) {
		return nil, fe
	}
	if err != nil {
		return nil, errors.New("want JSON {\"email\",\"type\",\"reason\",\"id\"}")
	}
	email, err := address.Normalize(in.get("email"))
	if err != nil {
		return nil, err
	}
	typ := in.get("type")
	if !store.FeedbackType(typ).Valid() {
		return nil, errors.New(`type must be "hard", "soft" or "complaint"`)
	}
	id := ""
	if v := in.get("id"); v != "" {
		id = "api-" + v
	}
	return []feedback.Event{{ID: id, Email: email, Type: typ, Reason: in.get("reason")}}, nil
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
