package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/store"
)

// bulkConfirmData is the page that asks again before an erasure.
type bulkConfirmData struct {
	In    subscribers.BulkInput
	Count int64
}

// bulkSubscribers is POST /admin/subscribers/bulk: an action on the
// ticked people (at once) or on the list's filter (a job of the worker,
// its progress page next), as POST /api/subscribers/bulk. An erasure is
// asked twice: the first post shows how many it erases and asks for
// that number.
func (h *Handler) bulkSubscribers(w http.ResponseWriter, r *http.Request) {
	if h.d.List == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "Not here", "Bulk actions are not wired in this console.")
		return
	}
	in, err := form.NewBulk(w, r)
	if err != nil {
		h.subscribersPage(w, r, form.Status(err), store.SubscriberQuery{}, "", err.Error())
		return
	}
	res, err := h.d.List.StartBulk(r.Context(), in)
	var ce *subscribers.ConfirmError
	var le *subscribers.ListError
	switch {
	case errors.As(err, &ce):
		h.render(w, r, http.StatusOK, "bulk_confirm", page{Title: "Erase people", Section: "subscribers", Data: bulkConfirmData{In: in, Count: ce.Count}})
		return
	case errors.As(err, &le):
		h.subscribersPage(w, r, le.Code, store.SubscriberQuery{}, "", "Nothing done: "+le.Msg+".")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	if res.Job != nil {
		http.Redirect(w, r, "/admin/jobs/"+res.Job.ID, http.StatusSeeOther)
		return
	}
	done(w, r, "/admin/subscribers", "bulk")
}
