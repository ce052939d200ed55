package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/store"
)

// bulkSubscribers handles POST /api/subscribers/bulk.
func (s *Server) bulkSubscribers(w http.ResponseWriter, r *http.Request) {
	var in subscribers.BulkInput
	if err := readListBody(w, r, &in); err != nil {
		s.answerListError(w, "bulk action", err)
		return
	}
	res, err := s.StartBulk(r.Context(), in)
	var ce *subscribers.ConfirmError
	switch {
	case errors.As(err, &ce):
		webjson.Write(w, http.StatusConflict, map[string]any{"error": ce.Error(), "confirm_required": true, "count": ce.Count})
	case err != nil:
		s.answerListError(w, "bulk action", err)
	case res.Job != nil:
		webjson.Write(w, http.StatusAccepted, res)
	default:
		webjson.Write(w, http.StatusOK, res)
	}
}

// bulkStatus handles GET /api/bulk/{id}: the job's progress.
func (s *Server) bulkStatus(w http.ResponseWriter, r *http.Request) {
	job, err := s.ListJob(r.Context(), r.PathValue("id"), listjobs.KindBulk)
	if errors.Is(err, listjobs.ErrNoJob) {
		webjson.Write(w, http.StatusNotFound, errorBody(err.Error()))
		return
	}
	if err != nil {
		s.answerListError(w, "bulk action", err)
		return
	}
	webjson.Write(w, http.StatusOK, job)
}

// createExport handles POST /api/exports: {status, topic, q} → 202 and
// the job ({"id", …}).
func (s *Server) createExport(w http.ResponseWriter, r *http.Request) {
	var f store.Filter
	if err := readListBody(w, r, &f); err != nil {
		s.answerListError(w, "export", err)
		return
	}
	job, err := s.StartExport(r.Context(), f)
	if err != nil {
		s.answerListError(w, "export", err)
		return
	}
	webjson.Write(w, http.StatusAccepted, job)
}

// getExport handles GET /api/exports/{id}: 202 and the progress while it
// runs, the CSV once done.
func (s *Server) getExport(w http.ResponseWriter, r *http.Request) {
	s.WriteExportCSV(w, r, r.PathValue("id"))
}

// StartBulk runs a bulk action (subscribers.Service.StartBulk).
func (s *Server) StartBulk(ctx context.Context, in subscribers.BulkInput) (subscribers.BulkResult, error) {
	return s.subs.StartBulk(ctx, in)
}

// ListJob reads a job of kind (subscribers.Service.ListJob).
func (s *Server) ListJob(ctx context.Context, id, kind string) (listjobs.Job, error) {
	return s.subs.ListJob(ctx, id, kind)
}

// StartExport asks the worker for a CSV of the selection f
// (subscribers.Service.StartExport).
func (s *Server) StartExport(ctx context.Context, f store.Filter) (listjobs.Job, error) {
	return s.subs.StartExport(ctx, f)
}

// WriteExportCSV answers export id (subscribers.Service.WriteExportCSV).
func (s *Server) WriteExportCSV(w http.ResponseWriter, r *http.Request, id string) {
	s.subs.WriteExportCSV(w, r, id)
}
