package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
)

// exportSubscriber is POST /admin/subscribers/{id}/export: everything
// held about the person as a JSON download (GDPR Art. 15), as GET
// /api/subscribers/{email}/export. A form post, not a link: it is
// recorded, and no crawler or prefetch makes one.
func (h *Handler) exportSubscriber(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subscriberOf(w, r)
	if !ok {
		return
	}
	if err := form.Empty(w, r); err != nil {
		h.errorPage(w, r, http.StatusBadRequest, "Bad form", err.Error())
		return
	}
	if h.d.People == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "Not here", "This process cannot export people.")
		return
	}
	body, err := h.d.People.Export(r.Context(), sub.Email)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.SubscriberExport, h.person(sub), "")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", `attachment; filename="subscriber-`+itoa(sub.ID)+`.json"`)
	_, _ = w.Write(body) // a client gone mid-body has nothing to hear
}
