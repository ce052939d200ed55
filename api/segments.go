package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/services/issues"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/segment"
	"github.com/newsletter/newsletter/store"
)

// Tags, custom fields and segments (the publisher's): the known tags,
// the fields declared, the segments saved and a live count of any
// expression.

var (
	fieldDefFields = fields{"name": textField, "type": textField, "choices": valueListField}
	segmentFields  = fields{"name": textField, "expr": textField}
)

func (s *Server) segmentRoutes() {
	v := func(h http.HandlerFunc) http.Handler { return s.Viewer(h) }
	e := func(h http.HandlerFunc) http.Handler { return s.Editor(h) }
	s.mux.Handle("GET /api/tags", v(s.listTags))
	s.mux.Handle("GET /api/fields", v(s.listFields))
	s.mux.Handle("POST /api/fields", e(s.declareField))
	s.mux.Handle("GET /api/segments", v(s.listSegments))
	s.mux.Handle("GET /api/segments/count", v(s.countSegment))
	s.mux.Handle("GET /api/segments/{id}", v(s.getSegment))
	s.mux.Handle("POST /api/segments", e(s.createSegment))
	s.mux.Handle("PUT /api/segments/{id}", e(s.putSegment))
	s.mux.Handle("DELETE /api/segments/{id}", e(s.deleteSegment))
}

// segmentFailed answers a store error of the tags, fields and segments:
// the caller's to fix (400, 404, 409), or the store's (503).
func (s *Server) segmentFailed(w http.ResponseWriter, what string, err error) {
	var se *segment.Error
	switch {
	case errors.As(err, &se):
		webjson.Write(w, http.StatusBadRequest, map[string]any{"error": se.Error(), "position": se.Pos})
	case errors.Is(err, store.ErrSegmentTaken):
		webjson.Write(w, http.StatusConflict, errorBody(err.Error()))
	case errors.Is(err, store.ErrSegmentName), errors.Is(err, store.ErrBadField), errors.Is(err, store.ErrBadTag):
		webjson.Write(w, http.StatusBadRequest, errorBody(err.Error()))
	case errors.Is(err, store.ErrNoSegment):
		webjson.Write(w, http.StatusNotFound, errorBody("no such segment"))
	case errors.Is(err, store.ErrSegmentCountSlow):
		// Not the store's fault and not worth a retry as it is: the
		// expression costs more than a count may.
		webjson.Write(w, http.StatusServiceUnavailable, errorBody(err.Error()))
	default:
		s.deps.Log.Error(what, "err", err)
		webjson.Write(w, http.StatusServiceUnavailable, errorBody("could not "+what+", please retry"))
	}
}

// listTags handles GET /api/tags: every tag ever given, sorted.
func (s *Server) listTags(w http.ResponseWriter, r *http.Request) {
	tags, err := s.deps.Store.KnownTags(r.Context())
	if err != nil {
		s.segmentFailed(w, "read the tags", err)
		return
	}
	webjson.Write(w, http.StatusOK, map[string]any{"tags": nonNil(tags)})
}

// listFields handles GET /api/fields: the declared fields by name.
func (s *Server) listFields(w http.ResponseWriter, r *http.Request) {
	defs, err := s.deps.Store.FieldDefs(r.Context())
	if err != nil {
		s.segmentFailed(w, "read the fields", err)
		return
	}
	webjson.Write(w, http.StatusOK, map[string]any{"fields": defs})
}

// declareField handles POST /api/fields {"name","type","choices"}: 200
// with the declaration. A bad name or type, choices where they do not
// belong, or a change of a declared field's type: 400.
func (s *Server) declareField(w http.ResponseWriter, r *http.Request) {
	in := s.readAdminJSON(w, r, fieldDefFields, false)
	if in == nil {
		return
	}
	d, err := s.deps.Store.DefineField(r.Context(), store.FieldDef{
		Name: in.get("name"), Type: store.FieldType(in.get("type")), Choices: in["choices"]})
	if err != nil {
		s.segmentFailed(w, "declare the field", err)
		return
	}
	s.note(r, audit.FieldDeclared, "field:"+d.Name, string(d.Type))
	webjson.Write(w, http.StatusOK, d)
}

// listSegments handles GET /api/segments.
func (s *Server) listSegments(w http.ResponseWriter, r *http.Request) {
	list, err := s.deps.Store.ListSegments(r.Context())
	if err != nil {
		s.segmentFailed(w, "read the segments", err)
		return
	}
	webjson.Write(w, http.StatusOK, map[string]any{"segments": list})
}

// getSegment handles GET /api/segments/{id}: by id or by name.
func (s *Server) getSegment(w http.ResponseWriter, r *http.Request) {
	seg, err := s.deps.Store.GetSegment(r.Context(), r.PathValue("id"))
	if err != nil {
		s.segmentFailed(w, "read the segment", err)
		return
	}
	webjson.Write(w, http.StatusOK, seg)
}

// countSegment handles GET /api/segments/count?expr=…: how many active
// people the expression matches now ("active", a send's audience) and
// how many of any status ("matching").
func (s *Server) countSegment(w http.ResponseWriter, r *http.Request) {
	expr := r.URL.Query().Get("expr")
	n, err := s.deps.Store.SegmentCount(r.Context(), expr)
	if err != nil {
		s.segmentFailed(w, "count the segment", err)
		return
	}
	webjson.Write(w, http.StatusOK, map[string]any{"expr": expr, "active": n.Active, "matching": n.Matching})
}

// createSegment handles POST /api/segments {"name","expr"}: 201 with the
// segment. A bad expression: 400 naming the position.
func (s *Server) createSegment(w http.ResponseWriter, r *http.Request) {
	in := s.readAdminJSON(w, r, segmentFields, false)
	if in == nil {
		return
	}
	seg, err := s.deps.Store.CreateSegment(r.Context(), strings.TrimSpace(in.get("name")), in.get("expr"))
	if err != nil {
		s.segmentFailed(w, "store the segment", err)
		return
	}
	s.note(r, audit.SegmentSaved, segmentTarget(seg.ID), seg.Expr)
	webjson.Write(w, http.StatusCreated, seg)
}

// putSegment handles PUT /api/segments/{id} {"name","expr"}.
func (s *Server) putSegment(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		webjson.Write(w, http.StatusNotFound, errorBody("no such segment"))
		return
	}
	in := s.readAdminJSON(w, r, segmentFields, false)
	if in == nil {
		return
	}
	seg, err := s.deps.Store.UpdateSegment(r.Context(), id, strings.TrimSpace(in.get("name")), in.get("expr"))
	if err != nil {
		s.segmentFailed(w, "store the segment", err)
		return
	}
	s.note(r, audit.SegmentSaved, segmentTarget(seg.ID), seg.Expr)
	webjson.Write(w, http.StatusOK, seg)
}

// deleteSegment handles DELETE /api/segments/{id}: 204.
func (s *Server) deleteSegment(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		webjson.Write(w, http.StatusNotFound, errorBody("no such segment"))
		return
	}
	if used, err := s.segmentInUse(r, id); err != nil {
		s.segmentFailed(w, "read the issues", err)
		return
	} else if used != 0 {
		webjson.Write(w, http.StatusConflict, errorBody("issue "+strconv.FormatInt(used, 10)+" is to go to this segment; change or cancel it first"))
		return
	}
	if err := s.deps.Store.DeleteSegment(r.Context(), id); err != nil {
		s.segmentFailed(w, "delete the segment", err)
		return
	}
	s.note(r, audit.SegmentDeleted, segmentTarget(id), "")
	w.WriteHeader(http.StatusNoContent)
}

// segmentInUse is SegmentInUse over the API's issues (none without them).
func (s *Server) segmentInUse(r *http.Request, id int64) (int64, error) {
	if s.deps.Issues == nil {
		return 0, nil
	}
	return issues.SegmentInUse(r.Context(), s.deps.Issues, id)
}

func segmentTarget(id int64) string { return "segment:" + strconv.FormatInt(id, 10) }

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}
