package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// subscriberTopics is POST /admin/subscribers/{id}/topics: the person's
// topics as the preference centre sets them (api's SetTopics).
func (h *Handler) subscriberTopics(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subscriberOf(w, r)
	if !ok {
		return
	}
	f, err := form.NewTopics(w, r)
	if err != nil {
		h.subscriberPage(w, r, form.Status(err), sub, err.Error())
		return
	}
	changed, err := h.d.Subscriptions.SetTopics(r.Context(), sub.Email, f.Topics)
	var bad *subscribers.TopicsError
	switch {
	case errors.As(err, &bad):
		h.subscriberPage(w, r, http.StatusBadRequest, sub, bad.Error())
		return
	case errors.Is(err, store.ErrNotActive):
		h.subscriberPage(w, r, http.StatusConflict, sub, "Only an active subscription's topics can change; this one is "+string(sub.Status)+".")
		return
	case errors.Is(err, store.ErrNotFound):
		h.notFound(w, r, "subscriber")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.SubscriberChanged, h.person(sub), "topics "+strings.Join(sub.Topics, ",")+" → "+strings.Join(changed.Topics, ","))
	done(w, r, "/admin/subscribers/"+itoa(sub.ID), "topics")
}
