package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/tasks"
)

// runDigest is POST /admin/digest/run: this week's digest planned now,
// by the path the cron run, `newsletter digest run` and POST
// /api/digest/run share (tasks.EnqueueDigestPlan), so a week is planned
// once whoever starts it; a second press says it is already queued.
func (h *Handler) runDigest(w http.ResponseWriter, r *http.Request) {
	if err := form.Empty(w, r); err != nil {
		h.errorPage(w, r, form.Status(err), "Not done", err.Error())
		return
	}
	period := tasks.Period(h.d.Now())
	dup, err := tasks.EnqueueDigestPlan(r.Context(), h.d.Queue, period)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	status := tasks.DigestRunStatus(dup)
	h.record(r, audit.DigestRun, "digest:"+period, status)
	notice := "digest-queued"
	if dup {
		notice = "digest-already"
	}
	done(w, r, "/admin/items", notice)
}
