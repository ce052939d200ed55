package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/store"
)

// findSubscriber is POST /admin/subscribers/find: the address comes in
// the form's body and the answer is a redirect to the person's page by
// id, so no address lands in a URL (a proxy's log, the browser's
// history). Nobody by that address: the list again, saying so.
func (h *Handler) findSubscriber(w http.ResponseWriter, r *http.Request) {
	f, err := form.NewFind(w, r)
	if err != nil {
		h.errorPage(w, r, form.Status(err), "Bad form", err.Error())
		return
	}
	email, err := address.Normalize(f.Email)
	if err != nil {
		h.subscribersPage(w, r, http.StatusBadRequest, store.SubscriberQuery{}, f.Email, "That is not an e-mail address.")
		return
	}
	sub, err := h.d.Store.Get(r.Context(), email)
	if errors.Is(err, store.ErrNotFound) {
		h.subscribersPage(w, r, http.StatusNotFound, store.SubscriberQuery{}, f.Email, "Nobody with that address is on the list.")
		return
	}
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/subscribers/"+itoa(sub.ID), http.StatusSeeOther)
}
