package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
)

// addWebhook is POST /admin/webhooks: webhooks.Service.Register, as POST
// /api/webhooks; the page shows the new endpoint's secret this once.
func (h *Handler) addWebhook(w http.ResponseWriter, r *http.Request) {
	f, err := form.NewWebhook(w, r)
	if err != nil {
		h.webhooks(w, r, form.Status(err), webhookListData{URL: f.URL, Events: f.Events}, err.Error())
		return
	}
	hook, err := h.d.Webhooks.Register(r.Context(), f.URL, f.Events)
	var bad *webhooks.BadEndpointError
	switch {
	case errors.As(err, &bad):
		h.webhooks(w, r, http.StatusBadRequest, webhookListData{URL: f.URL, Events: f.Events}, bad.Msg)
		return
	case errors.Is(err, store.ErrTooManyWebhooks):
		h.webhooks(w, r, http.StatusConflict, webhookListData{URL: f.URL, Events: f.Events}, err.Error())
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.WebhookAdded, "webhook:"+hook.ID, strings.Join(hook.Events, ","))
	h.webhooks(w, r, http.StatusCreated, webhookListData{Secret: hook.Secret, New: hook.ID}, "")
}
