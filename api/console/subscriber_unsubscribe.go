package console

import (
	"net/http"

	"github.com/newsletter/newsletter/internal/audit"
)

// unsubscribeSubscriber is POST /admin/subscribers/{id}/unsubscribe: the
// subscription ends as the person's own unsubscribe ends it.
func (h *Handler) unsubscribeSubscriber(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subscriberAction(w, r)
	if !ok {
		return
	}
	if err := h.d.Subscriptions.EndSubscription(r.Context(), sub.Email); err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.SubscriberChanged, h.person(sub), string(sub.Status)+" → unsubscribed")
	done(w, r, "/admin/subscribers/"+itoa(sub.ID), "left")
}
