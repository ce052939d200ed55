package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/services/listjobs"
)

// listJobData is a job's progress page.
type listJobData struct {
	listjobs.Job
	Percent int64
}

// showListJob is GET /admin/jobs/{id}: a bulk action's or an export's
// progress (reloading while it runs), and an export's download once done;
// its JSON with Accept: application/json.
func (h *Handler) showListJob(w http.ResponseWriter, r *http.Request) {
	if h.d.List == nil {
		h.notFound(w, r, "job")
		return
	}
	id := r.PathValue("id")
	job, err := h.d.List.ListJob(r.Context(), id, listjobs.KindExport)
	if errors.Is(err, listjobs.ErrNoJob) {
		job, err = h.d.List.ListJob(r.Context(), id, listjobs.KindBulk)
	}
	if errors.Is(err, listjobs.ErrNoJob) {
		h.notFound(w, r, "job")
		return
	}
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	if wantsJSON(r) {
		webjson.Write(w, http.StatusOK, job)
		return
	}
	d := listJobData{Job: job}
	if job.Total > 0 {
		d.Percent = min(100, 100*job.Done/job.Total)
	}
	refresh := 0
	if job.State == listjobs.StateRunning {
		refresh = 1
	}
	h.render(w, r, http.StatusOK, "list_job", page{Title: "Job " + job.ID[:8], Section: "subscribers", Refresh: refresh, Data: d})
}
