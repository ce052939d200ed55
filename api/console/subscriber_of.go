package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/store"
)

// subscriberOf loads the subscriber of the route's {id} (the console
// names people by id in its URLs, so no address reaches a log or a
// browser's history); it answers a bad or unknown one itself.
func (h *Handler) subscriberOf(w http.ResponseWriter, r *http.Request) (store.Subscriber, bool) {
	id, ok := pathID(r, "id")
	if !ok {
		h.notFound(w, r, "subscriber")
		return store.Subscriber{}, false
	}
	sub, err := h.d.Store.GetByID(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		h.notFound(w, r, "subscriber")
		return sub, false
	}
	if err != nil {
		h.storeAway(w, r, err)
		return sub, false
	}
	return sub, true
}

// subscriberAction begins a button's post about one person (unsubscribe,
// lift, export, erase): the subscriber of the route's {id} and the form,
// which carries nothing but the button's own fields (form.Empty). It
// answers a bad id, an unknown person or a bad form itself.
func (h *Handler) subscriberAction(w http.ResponseWriter, r *http.Request) (store.Subscriber, bool) {
	sub, ok := h.subscriberOf(w, r)
	if !ok {
		return sub, false
	}
	if err := form.Empty(w, r); err != nil {
		h.errorPage(w, r, form.Status(err), "Bad form", err.Error())
		return sub, false
	}
	return sub, true
}
