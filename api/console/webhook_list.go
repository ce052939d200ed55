package console

import (
	"net/http"

	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// webhookDeliveriesShown is how many of an endpoint's last deliveries
// the page lists (the API's route answers every kept one).
const webhookDeliveriesShown = 10

type webhookRow struct {
	store.Webhook
	Deliveries []store.WebhookDelivery
}

type webhookListData struct {
	Webhooks []webhookRow
	Types    []string
	// Form is what was typed (kept when refused); Secret, the new
	// endpoint's, shown this once.
	URL    string
	Events []string
	Secret string
	New    string
}

// listWebhooks is GET /admin/webhooks: every endpoint with its state
// and its last deliveries, the form that registers one.
func (h *Handler) listWebhooks(w http.ResponseWriter, r *http.Request) {
	h.webhooks(w, r, http.StatusOK, webhookListData{}, "")
}

func (h *Handler) webhooks(w http.ResponseWriter, r *http.Request, code int, d webhookListData, problem string) {
	list, err := h.d.Store.ListWebhooks(r.Context())
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	d.Types = tasks.WebhookTypes
	for _, hook := range list {
		hook.Secret = "" // never on a page but once, at registration
		ds, err := h.d.Store.WebhookDeliveries(r.Context(), hook.ID)
		if err != nil {
			ds = nil // removed meanwhile, or Redis failed: the row shows none
		}
		d.Webhooks = append(d.Webhooks, webhookRow{Webhook: hook, Deliveries: ds[:min(len(ds), webhookDeliveriesShown)]})
	}
	h.render(w, r, code, "webhooks", page{Title: "Webhooks", Section: "webhooks", Error: problem, Data: d})
}
