package console

import (
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/services/issues"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// deleteSegment is POST /admin/segments/{id}/delete, as DELETE
// /api/segments/{id}: refused (409) while an issue not yet sent goes to
// it.
func (h *Handler) deleteSegment(w http.ResponseWriter, r *http.Request) {
	seg, ok := h.segmentOf(w, r)
	if !ok {
		return
	}
	if err := form.Empty(w, r); err != nil {
		h.errorPage(w, r, form.Status(err), "Not done", err.Error())
		return
	}
	used, err := issues.SegmentInUse(r.Context(), h.d.Store, seg.ID)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	if used != 0 {
		h.errorPage(w, r, http.StatusConflict, "Not now", "Issue "+itoa(used)+" is to go to this segment: change its audience or cancel it first. Nothing was deleted.")
		return
	}
	if err := h.d.Store.DeleteSegment(r.Context(), seg.ID); err != nil && !errors.Is(err, store.ErrNoSegment) {
		h.storeAway(w, r, err)
		return
	}
	h.record(r, audit.SegmentDeleted, segmentTarget(seg.ID), seg.Name)
	done(w, r, "/admin/segments", "segment-deleted")
}
