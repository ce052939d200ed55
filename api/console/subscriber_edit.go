package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/store"
)

// editSubscriber is POST /admin/subscribers/{id}/edit: name, time zone
// and topics, as PATCH /api/subscribers/{email} sets them (api's
// ChangeSubscriber: checked, one step of the store, audited).
func (h *Handler) editSubscriber(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subscriberOf(w, r)
	if !ok {
		return
	}
	if h.d.List == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "Not here", "Editing people is not wired in this console.")
		return
	}
	in, err := form.NewEdit(w, r)
	if err != nil {
		h.subscriberPage(w, r, form.Status(err), sub, err.Error())
		return
	}
	_, err = h.d.List.ChangeSubscriber(r.Context(), sub.Email, in)
	var le *subscribers.ListError
	switch {
	case errors.As(err, &le):
		h.subscriberPage(w, r, le.Code, sub, "Not changed: "+le.Msg+".")
		return
	case errors.Is(err, store.ErrNotFound):
		h.notFound(w, r, "subscriber")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	done(w, r, "/admin/subscribers/"+itoa(sub.ID), "edited")
}
