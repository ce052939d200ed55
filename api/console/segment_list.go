package console

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/newsletter/newsletter/api/console/form"
	"github.com/newsletter/newsletter/internal/segment"
	"github.com/newsletter/newsletter/store"
)

// segmentRow is one saved segment with its audience now.
type segmentRow struct {
	store.Segment
	Count store.SegmentCount
	// Problem is why it cannot be counted now: its expression no longer
	// checks (a topic gone from the topics file, a field's type changed).
	Problem string
}

// segmentsData is the Segments screen's: the saved segments with their
// audience, and the editor of a new segment or of Editing.
type segmentsData struct {
	Rows    []segmentRow
	Editing *store.Segment // nil: a new segment
	Form    form.Segment
	// Count is the form's expression counted; Problem, why it could not
	// be (the parser's message, with Pointer: spaces and a caret under
	// the position it names).
	Count   *store.SegmentCount
	Problem string
	Pointer string
	// InUse is an issue not yet sent that goes to Editing (0: none): the
	// segment cannot be deleted while it does.
	InUse int64
	// People are a page of the saved segment's people (nil: not shown).
	People *segmentPeople
}

// CountText says what the form's count is, as the page's script does
// with the JSON of /admin/segments/count.
func (d segmentsData) CountText() string {
	if d.Count == nil {
		return ""
	}
	return countText(*d.Count)
}

func countText(n store.SegmentCount) string {
	people := " people match"
	if n.Active == 1 {
		people = " person matches"
	}
	return groupDigits(n.Active) + " active" + people + " now (" + groupDigits(n.Matching) + " of any status)."
}

// listSegments is GET /admin/segments: the saved segments with their
// audience now, and the form that saves a new one.
func (h *Handler) listSegments(w http.ResponseWriter, r *http.Request) {
	h.segments(w, r, http.StatusOK, segmentsData{})
}

// segments renders the Segments screen with d (what was typed, the
// segment edited), counting the form's expression unless d says why it
// cannot be.
func (h *Handler) segments(w http.ResponseWriter, r *http.Request, code int, d segmentsData) {
	list, err := h.d.Store.ListSegments(r.Context())
	if err != nil {
		h.storeAway(w, r, err)
		return
	}
	for _, s := range list {
		row := segmentRow{Segment: s}
		n, err := h.d.Store.SegmentCount(r.Context(), s.Expr)
		var bad *segment.Error
		switch {
		case errors.As(err, &bad):
			row.Problem = bad.Error()
		case errors.Is(err, store.ErrSegmentCountSlow):
			row.Problem = err.Error()
		case err != nil:
			h.storeAway(w, r, err)
			return
		default:
			row.Count = n
		}
		d.Rows = append(d.Rows, row)
	}
	if d.Count == nil && d.Problem == "" && d.Form.Expr != "" {
		if err := h.countForm(r.Context(), &d); err != nil {
			h.storeAway(w, r, err)
			return
		}
	}
	title := "Segments"
	if d.Editing != nil {
		title = d.Editing.Name
	}
	h.render(w, r, code, "segments", page{Title: title, Section: "segments", Data: d})
}

// countForm counts d's expression into d.Count, or says in d.Problem why
// it cannot be; the error is the store's alone.
func (h *Handler) countForm(ctx context.Context, d *segmentsData) error {
	n, err := h.d.Store.SegmentCount(ctx, d.Form.Expr)
	if err != nil {
		return d.refused(err)
	}
	d.Count = &n
	return nil
}

// refused puts a segment's error that is the publisher's to fix (a bad
// expression or name) in d and answers nil; any other error as it is.
func (d *segmentsData) refused(err error) error {
	var bad *segment.Error
	switch {
	case errors.As(err, &bad):
		d.Problem = bad.Error()
		if bad.Pos > 0 && bad.Pos <= utf8.RuneCountInString(d.Form.Expr)+1 && !strings.ContainsAny(d.Form.Expr, "\r\n") {
			d.Pointer = strings.Repeat(" ", bad.Pos-1) + "^"
		}
	case errors.Is(err, store.ErrSegmentName), errors.Is(err, store.ErrSegmentCountSlow):
		d.Problem = err.Error()
	default:
		return err
	}
	return nil
}
