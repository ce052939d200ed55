package console

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/segment"
	"github.com/newsletter/newsletter/store"
)

// countSegment is GET /admin/segments/count?expr=: how many people an
// expression matches now, as GET /api/segments/count. The editor's
// script asks for JSON (Accept: application/json) as the publisher
// types: {"expr","active","matching","text"}, or 400 {"error","position"}
// for an expression that does not parse or check. Without a script, the
// editor's Count button sends the form here (name, expr, and id for a
// saved segment's) and gets the page again with the count.
func (h *Handler) countSegment(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := form.SegmentOf(q)
	if wantsJSON(r) {
		n, err := h.d.Store.SegmentCount(r.Context(), f.Expr)
		var bad *segment.Error
		switch {
		case errors.As(err, &bad):
			webjson.Write(w, http.StatusBadRequest, map[string]any{"error": bad.Error(), "position": bad.Pos})
		case errors.Is(err, store.ErrSegmentCountSlow):
			webjson.Write(w, http.StatusServiceUnavailable, map[string]any{"error": err.Error()})
		case err != nil:
			h.storeAway(w, r, err)
		default:
			webjson.Write(w, http.StatusOK, map[string]any{"expr": f.Expr, "active": n.Active, "matching": n.Matching, "text": countText(n)})
		}
		return
	}
	d := segmentsData{Form: f}
	if id, err := strconv.ParseInt(q.Get("id"), 10, 64); err == nil && id > 0 {
		seg, ok := h.segmentByID(w, r, id)
		if !ok {
			return
		}
		if d, ok = h.editing(w, r, seg, f); !ok {
			return
		}
	}
	if err := h.countForm(r.Context(), &d); err != nil {
		h.storeAway(w, r, err)
		return
	}
	code := http.StatusOK
	if d.Problem != "" {
		code = http.StatusBadRequest
	}
	h.segments(w, r, code, d)
}
