package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
)

// eraseSubscriber is POST /admin/subscribers/{id}/erase (GDPR Art. 17),
// as DELETE /api/subscribers/{email}: the form asks the admin to type
// "erase", a button alone is too easy to press.
func (h *Handler) eraseSubscriber(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subscriberOf(w, r)
	if !ok {
		return
	}
	if err := form.Empty(w, r); err != nil {
		h.errorPage(w, r, http.StatusBadRequest, "Bad form", err.Error())
		return
	}
	if r.PostForm.Get("confirm") != "erase" {
		h.subscriberPage(w, r, http.StatusBadRequest, sub, `Type "erase" to confirm; nothing was erased.`)
		return
	}
	if h.d.People == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "Not here", "This process cannot erase people.")
		return
	}
	target := h.person(sub)
	if err := h.d.People.Erase(r.Context(), sub.Email); err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.SubscriberErased, target, "")
	done(w, r, "/admin/subscribers", "erased")
}
