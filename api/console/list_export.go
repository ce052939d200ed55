package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/store"
)

// exportList is POST /admin/exports: the list's filter as CSV, a job of
// the worker (api's StartExport); its progress page next, the download
// there once done.
func (h *Handler) exportList(w http.ResponseWriter, r *http.Request) {
	if h.d.List == nil {
		h.errorPage(w, r, http.StatusNotImplemented, "Not here", "Exports are not wired in this console.")
		return
	}
	f, err := form.NewExport(w, r)
	if err != nil {
		h.subscribersPage(w, r, form.Status(err), store.SubscriberQuery{}, "", err.Error())
		return
	}
	job, err := h.d.List.StartExport(r.Context(), f)
	var le *subscribers.ListError
	switch {
	case errors.As(err, &le):
		h.subscribersPage(w, r, le.Code, store.SubscriberQuery{}, "", "No export: "+le.Msg+".")
		return
	case err != nil:
		h.storeAway(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/jobs/"+job.ID, http.StatusSeeOther)
}
