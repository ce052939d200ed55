package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// eraseSubscriber is POST /admin/subscribers/{id}/erase (GDPR Art. 17),
// the erase of DELETE /api/subscribers/{email} (the person's waiting
// tasks go too) recorded as it is. It asks first: the form wants "erase"
// typed, a button alone is too easy to press; without it the person's
// page comes back saying so and nothing is erased. There is no GET: a
// link or a prefetch never erases anyone.
func (h *Handler) eraseSubscriber(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subscriberAction(w, r)
	if !ok {
		return
	}
	if h.d.Requests == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "Not here", "This process cannot erase people.")
		return
	}
	if r.PostForm.Get("confirm") != "erase" {
		h.subscriberPage(w, r, http.StatusBadRequest, sub, `Erasing cannot be undone: type "erase" to confirm. Nothing was erased.`)
		return
	}
	target := h.person(sub)
	err := h.d.Requests.Erase(r.Context(), sub.Email)
	if errors.Is(err, store.ErrNotFound) {
		// Erased by someone else in the meantime: the list says so.
		done(w, r, "/admin/subscribers", "erased")
		return
	}
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.SubscriberErased, target, "")
	done(w, r, "/admin/subscribers", "erased")
}
