package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/logredact"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/webhook"
)

// The outgoing webhook endpoints (admin): register, list, remove, enable.

var webhookFields = fields{"url": textField, "events": listField}

// maxWebhookURL bounds an endpoint's URL.
const maxWebhookURL = 2048

func (s *Server) webhookRoutes() {
	s.mux.Handle("POST /api/webhooks", s.Admin(http.HandlerFunc(s.addWebhook)))
	s.mux.Handle("GET /api/webhooks", s.Admin(http.HandlerFunc(s.listWebhooks)))
	s.mux.Handle("DELETE /api/webhooks/{id}", s.Admin(http.HandlerFunc(s.deleteWebhook)))
	s.mux.Handle("POST /api/webhooks/{id}/enable", s.Admin(http.HandlerFunc(s.enableWebhook)))
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
	raw := strings.TrimSpace(in.get("url"))
	events, msg := webhookEvents(in["events"])
	switch {
	case raw == "":
		msg = `want "url": the endpoint's https URL`
	case len(raw) > maxWebhookURL || strings.ContainsAny(raw, " \t\r\n"):
		msg = "the URL must be at most 2048 characters, without spaces or line breaks"
	}
	if msg != "" {
		WriteJSON(w, http.StatusBadRequest, errorBody(msg))
		return
	}
	if _, err := s.cfg.Endpoints.CheckURL(r.Context(), raw); err != nil {
		WriteJSON(w, http.StatusBadRequest, errorBody(err.Error()))
		return
	}
	hook, err := s.deps.Store.AddWebhook(r.Context(), store.Webhook{
		ID: newWebhookID(), URL: raw, Events: events, Secret: webhook.NewSecret(),
	})
	if errors.Is(err, store.ErrTooManyWebhooks) {
		WriteJSON(w, http.StatusConflict, errorBody(err.Error()))
		return
	}
	if err != nil {
		s.deps.Log.Error("webhooks: store", "err", err)
		WriteJSON(w, http.StatusServiceUnavailable, errorBody("could not store the endpoint, please retry"))
		return
	}
	s.deps.Notify.Forget()
	s.deps.Log.Info("webhooks: endpoint registered", "endpoint", hook.ID, "events", strings.Join(hook.Events, ","))
	s.note(r, audit.WebhookAdded, "webhook:"+hook.ID, strings.Join(hook.Events, ","))
	WriteJSON(w, http.StatusCreated, struct {
		webhookView
		Secret string `json:"secret"`
	}{webhookViewOf(hook), hook.Secret})
}

// webhookEvents checks the events field: known types, at least one; the
// list as given, without repeats. The message is "" when they are fine.
func webhookEvents(given []string) ([]string, string) {
	if len(given) == 0 {
		return nil, `want "events": a list of at least one of ` + strings.Join(webhook.Types, ", ")
	}
	var out []string
	for _, e := range given {
		if !webhook.Known(e) {
			return nil, "unknown event " + quote(e) + ": want " + strings.Join(webhook.Types, ", ")
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, ""
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}

func newWebhookID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "wh_" + hex.EncodeToString(b[:])
}

// listWebhooks handles GET /api/webhooks: every endpoint with its state.
func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	list, err := s.deps.Store.ListWebhooks(r.Context())
	if err != nil {
		WriteJSON(w, http.StatusServiceUnavailable, errorBody(err.Error()))
		return
	}
	out := struct {
		Webhooks []webhookView `json:"webhooks"`
	}{Webhooks: []webhookView{}}
	for _, h := range list {
		out.Webhooks = append(out.Webhooks, webhookViewOf(h))
	}
	WriteJSON(w, http.StatusOK, out)
}

// deleteWebhook handles DELETE /api/webhooks/{id}: 204; its waiting
// events are dropped when they come up.
func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	err := s.deps.Store.DeleteWebhook(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, store.ErrWebhookNotFound):
		WriteJSON(w, http.StatusNotFound, errorBody("no webhook endpoint "+quote(r.PathValue("id"))))
	case err != nil:
		WriteJSON(w, http.StatusServiceUnavailable, errorBody(err.Error()))
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
		WriteJSON(w, http.StatusNotFound, errorBody("no webhook endpoint "+quote(r.PathValue("id"))))
	case err != nil:
		WriteJSON(w, http.StatusServiceUnavailable, errorBody(err.Error()))
	default:
		s.deps.Notify.Forget()
		s.deps.Log.Info("webhooks: endpoint enabled", "endpoint", hook.ID)
		s.note(r, audit.WebhookEnabled, "webhook:"+hook.ID, "")
		WriteJSON(w, http.StatusOK, webhookViewOf(hook))
	}
}
