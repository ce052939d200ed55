package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// liftSuppression is POST /admin/suppressions/{id}/lift: the store's
// LiftSuppression, as DELETE /api/suppressions/{email}. It returns to
// the page the form was on (the list, or the person's page).
func (h *Handler) liftSuppression(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subscriberAction(w, r)
	if !ok {
		return
	}
	lifted, err := h.d.Store.LiftSuppression(r.Context(), sub.Email)
	switch {
	case errors.Is(err, store.ErrNotSuppressed):
		h.errorPage(w, r, http.StatusConflict, "Not suppressed", "This address is neither bounced nor complained; nothing was changed.")
		return
	case errors.Is(err, store.ErrNotFound):
		h.notFound(w, r, "subscriber")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	h.d.Log.Warn("suppression lifted by hand", "subscriber", sub.ID, "by", principalOf(r).Name, "now", lifted.Status)
	h.record(r, audit.SuppressionLifted, h.person(sub), string(sub.Status)+" → "+string(lifted.Status))
	back := "/admin/suppressions"
	if r.PostForm.Get("back") == "subscriber" {
		back = "/admin/subscribers/" + itoa(sub.ID)
	}
	done(w, r, back, "lifted")
}
