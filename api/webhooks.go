package api

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/webjson"
	"github.com/newsletter/newsletter/services/webhooks"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// The outgoing webhook endpoints (admin): register, list, remove, enable.

var webhookFields = fields{"url": textField, "events": listField}

func (s *Server) webhookRoutes() {
	if s.deps.Webhooks == nil {
		return // no endpoints to register, and none to list
	}
	s.mux.Handle("POST /api/webhooks", s.Admin(http.HandlerFunc(s.addWebhook)))
	s.mux.Handle("GET /api/webhooks", s.Admin(http.HandlerFunc(s.listWebhooks)))
	s.mux.Handle("DELETE /api/webhooks/{id}", s.Admin(http.HandlerFunc(s.deleteWebhook)))
	s.mux.Handle("POST /api/webhooks/{id}/enable", s.Admin(http.HandlerFunc(s.enableWebhook)))
	s.mux.Handle("POST /api/webhooks/{id}/disable", s.Admin(http.HandlerFunc(s.disableWebhook)))
	s.mux.Handle("POST /api/webhooks/{id}/test", s.Admin(http.HandlerFunc(s.testWebhook)))
	s.mux.Handle("GET /api/webhooks/{id}/deliveries", s.Admin(http.HandlerFunc(s.webhookDeliveries)))
}

// disableWebhook handles POST /api/webhooks/{id}/disable: the endpoint
// gets nothing until it is enabled again (its events are given up as a
// disabled endpoint's are: dead letters).
func (s *Server) disableWebhook(w http.ResponseWriter, r *http.Request) {
	hook, err := s.deps.Store.DisableWebhook(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, store.ErrWebhookNotFound):
		webjson.Write(w, http.StatusNotFound, errorBody("no webhook endpoint "+webjson.Quote(r.PathValue("id"))))
	case err != nil:
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
	default:
		s.deps.Notify.Forget()
		s.deps.Log.Info("webhooks: endpoint disabled", "endpoint", hook.ID)
		s.note(r, audit.WebhookDisabled, "webhook:"+hook.ID, "")
		webjson.Write(w, http.StatusOK, webhookViewOf(hook))
	}
}

// testWebhook handles POST /api/webhooks/{id}/test: 202 with the queued
// sample event's id; its outcome shows in the deliveries.
func (s *Server) testWebhook(w http.ResponseWriter, r *http.Request) {
	ev, err := s.deps.Webhooks.Test(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, store.ErrWebhookNotFound):
		webjson.Write(w, http.StatusNotFound, errorBody("no webhook endpoint "+webjson.Quote(r.PathValue("id"))))
	case errors.Is(err, webhooks.ErrDisabled):
		webjson.Write(w, http.StatusConflict, errorBody(err.Error()))
	case err != nil:
		s.deps.Log.Error("webhooks: test", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not queue the test event, please retry"))
	default:
		s.note(r, audit.WebhookTested, "webhook:"+r.PathValue("id"), ev)
		webjson.Write(w, http.StatusAccepted, map[string]string{"event": ev, "type": tasks.WebhookTestType})
	}
}

// webhookDeliveries handles GET /api/webhooks/{id}/deliveries: the
// endpoint's last attempts, newest first.
func (s *Server) webhookDeliveries(w http.ResponseWriter, r *http.Request) {
	list, err := s.deps.Store.WebhookDeliveries(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, store.ErrWebhookNotFound):
		webjson.Write(w, http.StatusNotFound, errorBody("no webhook endpoint "+webjson.Quote(r.PathValue("id"))))
	case err != nil:
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
	default:
		webjson.Write(w, http.StatusOK, map[string]any{"deliveries": list})
	}
}

// webhookView is an endpoint as the API shows it: never its secret.
type webhookView struct {
	ID           string             `json:"id"`
	URL          string             `json:"url"`
	Events       []string           `json:"events"`
	State        store.WebhookState `json:"state"`
	Failures     int                `json:"failures"`
	FailingSince *time.Time         `json:"failing_since"`
	DisabledAt   *time.Time         `json:"disabled_at"`
	CreatedAt    time.Time          `json:"created_at"`
}

func webhookViewOf(w store.Webhook) webhookView {
	return webhookView{
		ID: w.ID, URL: w.URL, Events: w.Events, State: w.State, Failures: w.Failures,
		FailingSince: timePtr(w.FailingSince), DisabledAt: timePtr(w.DisabledAt), CreatedAt: w.CreatedAt,
	}
}

// addWebhook handles POST /api/webhooks {"url","events":[…]}: 201 with the
// id and the secret, which is shown this once. An unknown event, a URL
// that is not https or that resolves to a private address: 400, nothing
// stored.
func (s *Server) addWebhook(w http.ResponseWriter, r *http.Request) {
	in := s.readAdminJSON(w, r, webhookFields, false)
	if in == nil {
		return
	}
	hook, err := s.deps.Webhooks.Register(r.Context(), in.get("url"), in["events"])
	var bad *webhooks.BadEndpointError
	switch {
	case errors.As(err, &bad):
		webjson.Write(w, http.StatusBadRequest, errorBody(bad.Msg))
		return
	case errors.Is(err, store.ErrTooManyWebhooks):
		webjson.Write(w, http.StatusConflict, errorBody(err.Error()))
		return
	case err != nil:
		s.deps.Log.Error("webhooks: store", "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not store the endpoint, please retry"))
		return
	}
	s.deps.Notify.Forget()
	s.deps.Log.Info("webhooks: endpoint registered", "endpoint", hook.ID, "events", strings.Join(hook.Events, ","))
	s.note(r, audit.WebhookAdded, "webhook:"+hook.ID, strings.Join(hook.Events, ","))
	webjson.Write(w, http.StatusCreated, struct {
		webhookView
		Secret string `json:"secret"`
	}{webhookViewOf(hook), hook.Secret})
}

// listWebhooks handles GET /api/webhooks: every endpoint with its state.
func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	list, err := s.deps.Store.ListWebhooks(r.Context())
	if err != nil {
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
		return
	}
	out := struct {
		Webhooks []webhookView `json:"webhooks"`
	}{Webhooks: []webhookView{}}
	for _, h := range list {
		out.Webhooks = append(out.Webhooks, webhookViewOf(h))
	}
	webjson.Write(w, http.StatusOK, out)
}

// deleteWebhook handles DELETE /api/webhooks/{id}: 204; its waiting
// events are dropped when they come up.
func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	err := s.deps.Store.DeleteWebhook(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, store.ErrWebhookNotFound):
		webjson.Write(w, http.StatusNotFound, errorBody("no webhook endpoint "+webjson.Quote(r.PathValue("id"))))
	case err != nil:
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
	default:
		s.deps.Notify.Forget()
		s.deps.Log.Info("webhooks: endpoint removed", "endpoint", logredact.Clip(r.PathValue("id")))
		s.note(r, audit.WebhookRemoved, "webhook:"+r.PathValue("id"), "")
		w.WriteHeader(http.StatusNoContent)
	}
}

// enableWebhook handles POST /api/webhooks/{id}/enable: a disabled
// endpoint gets events again (its dead letters are re-run in asynqmon).
func (s *Server) enableWebhook(w http.ResponseWriter, r *http.Request) {
	hook, err := s.deps.Store.EnableWebhook(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, store.ErrWebhookNotFound):
		webjson.Write(w, http.StatusNotFound, errorBody("no webhook endpoint "+webjson.Quote(r.PathValue("id"))))
	case err != nil:
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
	default:
		s.deps.Notify.Forget()
		s.deps.Log.Info("webhooks: endpoint enabled", "endpoint", hook.ID)
		s.note(r, audit.WebhookEnabled, "webhook:"+hook.ID, "")
		webjson.Write(w, http.StatusOK, webhookViewOf(hook))
	}
}
