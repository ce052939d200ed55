package console

import (
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
)

// saveSegment is POST /admin/segments/{id}: a new name and expression,
// as PUT /api/segments/{id}. Issues that go to the segment keep going
// to it (they name its id) and read its expression when they are
// planned. A bad one: the form again with the reason, nothing saved.
func (h *Handler) saveSegment(w http.ResponseWriter, r *http.Request) {
	seg, ok := h.segmentOf(w, r)
	if !ok {
		return
	}
	f, err := form.NewSegment(w, r)
	d, ok := h.editing(w, r, seg, f)
	if !ok {
		return
	}
	if err != nil {
		d.Problem = err.Error()
		h.segments(w, r, form.Status(err), d)
		return
	}
	saved, err := h.d.Store.UpdateSegment(r.Context(), seg.ID, f.Name, f.Expr)
	if err != nil {
		h.segmentRefused(w, r, d, err)
		return
	}
	h.record(r, audit.SegmentSaved, segmentTarget(saved.ID), saved.Expr)
	done(w, r, "/admin/segments/"+itoa(saved.ID), "segment-saved")
}
