package console

import (
	"errors"
	"net/http"

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
