package console

import (
	"encoding/json"
	"errors"
	"net/http"

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
	body, err := json.MarshalIndent(data, "", "  ")
	if err != nil {
		h.d.Log.Error("console: export not encoded", "subscriber", sub.ID, "err", err)
		h.errorPage(w, r, http.StatusInternalServerError, "Not exported", "The export could not be written; nothing was sent.")
		return
	}
	h.record(r, audit.SubscriberExport, h.person(sub), "")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", `attachment; filename="subscriber-`+itoa(sub.ID)+`.json"`)
	_, _ = w.Write(append(body, '\n')) // a client gone mid-body has nothing to hear
}
