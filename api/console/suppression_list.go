package console

import (
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/store"
)

// suppressionsPage is how many suppressed addresses a page lists.
const suppressionsPage = 50

type suppressionListData struct {
	People []store.Subscriber
	Reason string
	Next   int64
}

// listSuppressions is GET /admin/suppressions?reason=&after=: the
// bounced and complained addresses in id order, as GET
// /api/suppressions.
func (h *Handler) listSuppressions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	reason := store.Status(q.Get("reason"))
	if reason != store.Bounced && reason != store.Complained {
		reason = ""
	}
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	list, err := h.d.Store.Suppressed(r.Context(), reason, max(after, 0), suppressionsPage)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	d := suppressionListData{People: list, Reason: string(reason)}
	if len(list) == suppressionsPage {
		d.Next = list[len(list)-1].ID
	}
	h.render(w, r, http.StatusOK, "suppressions", page{Title: "Suppressions", Section: "suppressions", Data: d})
}
