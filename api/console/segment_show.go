package console

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/services/issues"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/store"
)

// segmentOf loads the segment of the route's {id}; it answers a bad or
// unknown one itself.
func (h *Handler) segmentOf(w http.ResponseWriter, r *http.Request) (store.Segment, bool) {
	id, ok := pathID(r, "id")
	if !ok {
		h.notFound(w, r, "segment")
		return store.Segment{}, false
	}
	return h.segmentByID(w, r, id)
}

func (h *Handler) segmentByID(w http.ResponseWriter, r *http.Request, id int64) (store.Segment, bool) {
	seg, err := h.d.Store.GetSegment(r.Context(), strconv.FormatInt(id, 10))
	if errors.Is(err, store.ErrNoSegment) {
		h.notFound(w, r, "segment")
		return seg, false
	}
	if err != nil {
		h.storeAway(w, r, err)
		return seg, false
	}
	return seg, true
}

// editing is the Segments screen's data for seg's editor, with the
// issue that keeps it from being deleted.
func (h *Handler) editing(w http.ResponseWriter, r *http.Request, seg store.Segment, f form.Segment) (segmentsData, bool) {
	used, err := issues.SegmentInUse(r.Context(), h.d.Store, seg.ID)
	if err != nil {
		h.storeAway(w, r, err)
		return segmentsData{}, false
	}
	return segmentsData{Editing: &seg, Form: f, InUse: used}, true
}

// showSegment is GET /admin/segments/{id}: the segment's editor with its
// audience now (an editor's), a page of its people (after=: the next
// page's cursor), the list below.
func (h *Handler) showSegment(w http.ResponseWriter, r *http.Request) {
	seg, ok := h.segmentOf(w, r)
	if !ok {
		return
	}
	d, ok := h.editing(w, r, seg, form.Segment{Name: seg.Name, Expr: seg.Expr})
	if !ok {
		return
	}
	people, err := h.segmentPeopleOf(r, seg)
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	d.People = &people
	h.segments(w, r, http.StatusOK, d)
}
