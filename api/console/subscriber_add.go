package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/store"
)

// addSubscriber is POST /admin/subscribers: a person added by hand, as
// POST /api/subscribers adds one (api's AddSubscriber: the checks, the
// consent record, the audit entry); their page on success, the list
// with the reason otherwise.
func (h *Handler) addSubscriber(w http.ResponseWriter, r *http.Request) {
	if h.d.List == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "Not here", "Adding people is not wired in this console.")
		return
	}
	in, err := form.NewAdd(w, r)
	if err != nil {
		h.subscribersPage(w, r, form.Status(err), store.SubscriberQuery{}, "", err.Error())
		return
	}
	sub, err := h.d.List.AddSubscriber(r.Context(), in)
	var le *subscribers.ListError
	switch {
	case errors.As(err, &le):
		h.subscribersPage(w, r, le.Code, store.SubscriberQuery{}, "", "Not added: "+le.Msg+".")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	done(w, r, "/admin/subscribers/"+itoa(sub.ID), "added")
}
