package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/newsletter/newsletter/services/subscribers"

	"github.com/newsletter/newsletter/internal/webjson"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

func (s *Server) applier() *listjobs.Applier {
	a := &listjobs.Applier{Store: s.deps.Store, Topics: s.cfg.Topics}
	if s.deps.Tasks != nil {
		a.Tasks = s.deps.Tasks
	}
	return a
}

// checkFilter checks a filter and counts its selection (-1: unknown).
func (s *Server) checkFilter(ctx context.Context, f store.Filter) (int64, error) {
	if f.Status != "" && !f.Status.Valid() {
		return 0, bad("filter: unknown status %q", f.Status)
	}
	if _, ok := s.cfg.Topics.Current().Topic(f.Topic); f.Topic != "" && !ok {
		return 0, bad("filter: unknown topic %q: want one of %s", f.Topic, strings.Join(s.cfg.Topics.Current().IDs(), ", "))
	}
	return s.deps.Store.CountSelection(ctx, f)
}

// StartBulk runs a bulk action: on a list of addresses at once, on a
// filter as a job of the worker (tasks.TypeSubscribersBulk). An erasure
// is asked twice: without "confirm" equal to the selection's size it
// answers a ConfirmError with the size, and changes nothing.
func (s *Server) StartBulk(ctx context.Context, in subscribers.BulkInput) (subscribers.BulkResult, error) {
	a := s.applier()
	if listjobs.TagAction(in.Action) {
		// The job and the applier take the tag where they take a topic.
		in.Topic = strings.TrimSpace(in.Tag)
	}
	if err := a.Check(in.Action, in.Topic); err != nil {
		return subscribers.BulkResult{}, bad("%v", err)
	}
	if (in.Filter == nil) == (in.Emails == nil) {
		return subscribers.BulkResult{}, bad("give a filter or a list of emails (one of them)")
	}
	res := subscribers.BulkResult{Action: in.Action}
	var emails []string
	if in.Emails != nil {
		if len(in.Emails) == 0 || len(in.Emails) > subscribers.MaxBulkEmails {
			return res, bad("emails: 1 to %d addresses", subscribers.MaxBulkEmails)
		}
		for _, e := range in.Emails {
			n, err := address.Normalize(e)
			if err != nil {
				return res, bad("emails: %q: %v", e, err)
			}
			if !slices.Contains(emails, n) {
				emails = append(emails, n)
			}
		}
		res.Count = int64(len(emails))
	} else {
		n, err := s.checkFilter(ctx, *in.Filter)
		if err != nil {
			return res, err
		}
		// An erasure is confirmed by the people it touches: a search's
		// count counts index entries (one person may match by address
		// and by name), so it is read, as a selection the indexes
		// cannot count is.
		if in.Action == listjobs.ActionErase && (n < 0 || in.Filter.Q != "") {
			if n, err = s.countSelection(ctx, *in.Filter); err != nil {
				return res, err
			}
		}
		res.Count = n
	}
	if in.Action == listjobs.ActionErase && res.Count == 0 {
		// A job's cap of 0 would mean none: an empty selection now may
		// not be empty when the job runs.
		return res, bad("the selection is empty: nobody to erase")
	}
	if in.Action == listjobs.ActionErase && (in.Confirm == nil || *in.Confirm != res.Count) {
		return res, &subscribers.ConfirmError{Count: res.Count}
	}
	if in.Filter != nil {
		return s.startBulkJob(ctx, in, res)
	}
	return s.applyToEach(ctx, a, in, emails, res)
}

// applyToEach makes a bulk action on a list of addresses at once: each
// person's change is the Applier's, as a job's would be; one audit entry
// says what the whole action did.
func (s *Server) applyToEach(ctx context.Context, a *listjobs.Applier, in subscribers.BulkInput, emails []string, res subscribers.BulkResult) (subscribers.BulkResult, error) {
	for _, email := range emails {
		sub, err := s.deps.Store.Get(ctx, email)
		if errors.Is(err, store.ErrNotFound) {
			res.NotFound = append(res.NotFound, email)
			continue
		}
		if err != nil {
			return res, err
		}
		changed, err := a.Apply(ctx, in.Action, in.Topic, sub)
		if err != nil {
			return res, err
		}
		if changed {
			res.Changed++
		} else {
			res.Skipped++
		}
	}
	if s.deps.Audit != nil {
		// One entry for the whole action (see listjobs.AuditBulk).
		_ = s.deps.Audit.Note(ctx, audit.Entry{Action: listjobs.AuditBulk, Target: fmt.Sprintf("addresses:%d", len(emails)),
			Detail: fmt.Sprintf("%s %s: %d changed, %d left as they were, %d not on the list", in.Action, in.Topic, res.Changed, res.Skipped, len(res.NotFound))}) // logged and counted by the Trail
	}
	return res, nil
}

// startBulkJob queues a bulk action on a filter as a list job: its
// selection is read when the job runs, an erasure capped at the count
// confirmed now.
func (s *Server) startBulkJob(ctx context.Context, in subscribers.BulkInput, res subscribers.BulkResult) (subscribers.BulkResult, error) {
	who, role := actor(ctx)
	if s.deps.ListJobs == nil {
		return res, &subscribers.ListError{Code: http.StatusServiceUnavailable, Msg: "bulk actions on a filter need the worker's jobs, not configured here"}
	}
	job := listjobs.Job{Kind: listjobs.KindBulk, Filter: *in.Filter, Action: in.Action, Topic: in.Topic,
		Total: res.Count, By: who, Role: role, Created: s.deps.Now().UTC()}
	if in.Action == listjobs.ActionErase {
		job.Max = res.Count
	}
	job, err := s.deps.ListJobs.Create(ctx, job)
	if err != nil {
		return res, err
	}
	if _, err := s.deps.Queue.EnqueueContext(ctx, tasks.SubscribersBulk.New(tasks.ListJobPayload{ID: job.ID})); err != nil {
		return res, err
	}
	res.Job = &job
	return res, nil
}

// countSelection counts a selection by reading it (MaxEraseCount at most).
func (s *Server) countSelection(ctx context.Context, f store.Filter) (int64, error) {
	var n int64
	cursor := ""
	for {
		subs, next, err := s.deps.Store.Select(ctx, f, cursor, store.MaxSubscriberPage)
		if err != nil {
			return 0, err
		}
		n += int64(len(subs))
		if n > subscribers.MaxEraseCount {
			return 0, bad("the selection is over %d people: narrow it to erase", subscribers.MaxEraseCount)
		}
		if next == "" {
			return n, nil
		}
		cursor = next
	}
}

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

// ListJob reads a job of kind; ErrNoJob for another kind's.
func (s *Server) ListJob(ctx context.Context, id, kind string) (listjobs.Job, error) {
	if s.deps.ListJobs == nil {
		return listjobs.Job{}, listjobs.ErrNoJob
	}
	job, err := s.deps.ListJobs.Get(ctx, id)
	if err == nil && job.Kind != kind {
		return listjobs.Job{}, listjobs.ErrNoJob
	}
	return job, err
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

// StartExport asks the worker for a CSV of the selection f
// (tasks.TypeExportRun); the job's id is its download's.
func (s *Server) StartExport(ctx context.Context, f store.Filter) (listjobs.Job, error) {
	n, err := s.checkFilter(ctx, f)
	if err != nil {
		return listjobs.Job{}, err
	}
	if s.deps.ListJobs == nil {
		return listjobs.Job{}, &subscribers.ListError{Code: http.StatusServiceUnavailable, Msg: "exports need the worker's jobs, not configured here"}
	}
	who, role := actor(ctx)
	job, err := s.deps.ListJobs.Create(ctx, listjobs.Job{Kind: listjobs.KindExport, Filter: f, Total: n, By: who, Role: role, Created: s.deps.Now().UTC()})
	if err != nil {
		return job, err
	}
	if _, err := s.deps.Queue.EnqueueContext(ctx, tasks.ExportRun.New(tasks.ListJobPayload{ID: job.ID})); err != nil {
		return job, err
	}
	return job, nil
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

// WriteExportCSV answers export id: 404 unknown or expired, 202 with the
// job while it runs, 500 with it when it failed, the CSV once done
// (chunk by chunk from Redis: the memory of one chunk).
func (s *Server) WriteExportCSV(w http.ResponseWriter, r *http.Request, id string) {
	ctx := r.Context()
	job, err := s.ListJob(ctx, id, listjobs.KindExport)
	switch {
	case errors.Is(err, listjobs.ErrNoJob):
		webjson.Write(w, http.StatusNotFound, errorBody("no such export (exports are kept 24 hours)"))
		return
	case err != nil:
		s.answerListError(w, "export", err)
		return
	case job.State == listjobs.StateRunning:
		webjson.Write(w, http.StatusAccepted, job)
		return
	case job.State == listjobs.StateFailed:
		webjson.Write(w, http.StatusInternalServerError, map[string]any{"error": "the export failed: " + job.Error, "job": job})
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="subscribers-%s-%s.csv"`, job.Created.Format("20060102"), job.ID[:8]))
	w.Header().Set("Cache-Control", "no-store") // personal data
	w.WriteHeader(http.StatusOK)
	for i := range job.Chunks {
		b, err := s.deps.ListJobs.Chunk(ctx, job.ID, i)
		if err != nil {
			// The status is sent: the download ends short, and the
			// client sees a truncated body (no final newline count).
			s.deps.Log.Error("export: read a chunk", "export", job.ID, "chunk", i, "err", err)
			return
		}
		if _, err := w.Write(b); err != nil {
			return // the client left
		}
	}
	s.note(r, "subscribers.export_downloaded", "export:"+job.ID, fmt.Sprintf("%d rows", job.Done))
}
