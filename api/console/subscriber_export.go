package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// exportSubscriber is POST /admin/subscribers/{id}/export: everything
// held about the person as a JSON download (GDPR Art. 15), the same JSON
// as GET /api/subscribers/{email}/export and recorded as it is. A form
// post, not a link: no crawler or prefetch makes one.
func (h *Handler) exportSubscriber(w http.ResponseWriter, r *http.Request) {
	sub, ok := h.subscriberAction(w, r)
	if !ok {
		return
	}
	if h.d.Requests == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "Not here", "This process cannot export people.")
		return
	}
	data, err := h.d.Requests.Export(r.Context(), sub.Email)
	if errors.Is(err, store.ErrNotFound) {
		h.notFound(w, r, "subscriber")
		return
	}
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.SubscriberExport, h.person(sub), "")
	subscribers.WriteExport(w, data, "subscriber-"+itoa(sub.ID)+".json")
}
