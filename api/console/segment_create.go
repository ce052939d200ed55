package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// createSegment is POST /admin/segments: name and expr, checked and
// saved by the store as POST /api/segments does. A bad expression or
// name: the form again with the reason (the parser's, with where), and
// nothing saved.
func (h *Handler) createSegment(w http.ResponseWriter, r *http.Request) {
	f, err := form.NewSegment(w, r)
	if err != nil {
		h.segments(w, r, form.Status(err), segmentsData{Form: f, Problem: err.Error()})
		return
	}
	seg, err := h.d.Store.CreateSegment(r.Context(), f.Name, f.Expr)
	if err != nil {
		h.segmentRefused(w, r, segmentsData{Form: f}, err)
		return
	}
	h.record(r, audit.SegmentSaved, segmentTarget(seg.ID), seg.Expr)
	done(w, r, "/admin/segments/"+itoa(seg.ID), "segment-saved")
}

// segmentRefused answers a save the store refused: the form again with
// the reason (400; 409 for a name another segment has) when it is the
// publisher's to fix, a page for the rest.
func (h *Handler) segmentRefused(w http.ResponseWriter, r *http.Request, d segmentsData, err error) {
	if errors.Is(err, store.ErrNoSegment) {
		h.notFound(w, r, "segment")
		return
	}
	if err := d.refused(err); err != nil {
		h.storeAway(w, r, err)
		return
	}
	code := http.StatusBadRequest
	if errors.Is(err, store.ErrSegmentTaken) {
		code = http.StatusConflict
	}
	h.segments(w, r, code, d)
}

func segmentTarget(id int64) string { return "segment:" + itoa(id) }
