package form

import (
	"net/http"
	"net/url"
	"strings"
)

// Segment is the segment editor's form: a name and an expression (the
// store checks both).
type Segment struct {
	Name string
	Expr string
}

// NewSegment reads the segment form.
func NewSegment(w http.ResponseWriter, r *http.Request) (Segment, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Segment{}, err
	}
	return Segment{Name: value(r, "name"), Expr: value(r, "expr")}, nil
}

// SegmentOf reads the form from a query: the Count button, which sends
// the form by GET where no script counts as the publisher types.
func SegmentOf(q url.Values) Segment {
	return Segment{Name: strings.TrimSpace(q.Get("name")), Expr: strings.TrimSpace(q.Get("expr"))}
}
