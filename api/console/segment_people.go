package console

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/newsletter/newsletter/internal/segment"
	"github.com/newsletter/newsletter/store"
)

// SegmentPage is how many people a segment's page lists at a time.
const SegmentPage = 50

// segmentPeople is a page of a segment's people: the active ones its
// expression picks, in the order a send walks them.
type segmentPeople struct {
	People []store.Subscriber
	// Next is the cursor of the next page (0: this is the last), and
	// First tells a page after the first (a link back to it).
	Next  int64
	First bool
	// Problem is why the people cannot be listed (the expression no
	// longer checks).
	Problem string
}

// segmentPeopleOf reads the page of seg's people after the query's
// cursor ("after", a walk key; a bad one starts at the first page): at
// most SegmentPage people, a bounded read of the store (one more id than
// shown tells whether a next page exists).
func (h *Handler) segmentPeopleOf(r *http.Request, seg store.Segment) (segmentPeople, error) {
	after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if err != nil || after < 0 {
		after = 0
	}
	out := segmentPeople{First: after == 0}
	ids, err := h.d.Store.SegmentAudienceByShard(r.Context(), seg.Expr, after, SegmentPage+1)
	var bad *segment.Error
	if errors.As(err, &bad) {
		out.Problem = bad.Error()
		return out, nil
	}
	if err != nil {
		return out, err
	}
	if len(ids) > SegmentPage {
		ids = ids[:SegmentPage]
		out.Next = store.WalkKey(ids[len(ids)-1])
	}
	subs, err := h.d.Store.SubscribersByID(r.Context(), ids)
	if err != nil {
		return out, err
	}
	for _, s := range subs {
		if s.ID != 0 { // erased since the walk
			out.People = append(out.People, s)
		}
	}
	return out, nil
}

// PageSize is SegmentPage, for the page's words.
func (segmentsData) PageSize() int { return SegmentPage }
