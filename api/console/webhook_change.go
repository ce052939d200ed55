package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
)

// changeWebhook is POST /admin/webhooks/{id}/enable, /disable and
// /delete, as the API's routes of the same names.
func (h *Handler) changeWebhook(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := form.Empty(w, r); err != nil {
			h.errorPage(w, r, form.Status(err), "Not done", err.Error())
			return
		}
		id := r.PathValue("id")
		var err error
		var entry, notice string
		switch action {
		case "enable":
			_, err = h.d.Store.EnableWebhook(r.Context(), id)
			entry, notice = audit.WebhookEnabled, "webhook-enabled"
		case "disable":
			_, err = h.d.Store.DisableWebhook(r.Context(), id)
			entry, notice = audit.WebhookDisabled, "webhook-disabled"
		default:
			err = h.d.Store.DeleteWebhook(r.Context(), id)
			entry, notice = audit.WebhookRemoved, "webhook-removed"
		}
		if errors.Is(err, store.ErrWebhookNotFound) {
			h.notFound(w, r, "webhook endpoint")
			return
		}
		if err != nil {
			h.storeAway(w, r, err)
			return
		}
		h.record(r, entry, "webhook:"+id, "")
		done(w, r, "/admin/webhooks", notice)
	}
}

// testWebhook is POST /admin/webhooks/{id}/test: one sample event
// queued through the real delivery path (webhooks.Service.Test, as POST
// /api/webhooks/{id}/test); its outcome shows in the deliveries.
func (h *Handler) testWebhook(w http.ResponseWriter, r *http.Request) {
	if err := form.Empty(w, r); err != nil {
		h.errorPage(w, r, form.Status(err), "Not done", err.Error())
		return
	}
	id := r.PathValue("id")
	ev, err := h.d.Webhooks.Test(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrWebhookNotFound):
		h.notFound(w, r, "webhook endpoint")
		return
	case errors.Is(err, webhooks.ErrDisabled):
		h.errorPage(w, r, http.StatusConflict, "Not tested", "The endpoint is disabled: enable it to test it.")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.WebhookTested, "webhook:"+id, ev)
	done(w, r, "/admin/webhooks", "webhook-tested")
}
