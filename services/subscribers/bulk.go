package subscribers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/webjson"
	"github.com/newsletter/newsletter/services/listjobs"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Bulk actions on a selection and the CSV export (docs/publishing.md):
// the API's routes and the console's forms start them here.

func (s *Service) applier() *listjobs.Applier {
	a := &listjobs.Applier{Store: s.Store, Topics: s.Topics, Channels: channelErasers(s.Channels)}
	if s.Tasks != nil {
		a.Tasks = s.Tasks
	}
	return a
}

// checkFilter checks a filter and counts its selection (-1: unknown).
func (s *Service) checkFilter(ctx context.Context, f store.Filter) (int64, error) {
	if f.Status != "" && !f.Status.Valid() {
		return 0, bad("filter: unknown status %q", f.Status)
	}
	if _, ok := s.topics().Topic(f.Topic); f.Topic != "" && !ok {
		return 0, bad("filter: unknown topic %q: want one of %s", f.Topic, strings.Join(s.topics().IDs(), ", "))
	}
	return s.Store.CountSelection(ctx, f)
}

// StartBulk runs a bulk action: on a list of addresses at once, on a
// filter as a job of the worker (tasks.TypeSubscribersBulk). An erasure
// is asked twice: without "confirm" equal to the selection's size it
// answers a ConfirmError with the size, and changes nothing.
func (s *Service) StartBulk(ctx context.Context, in BulkInput) (BulkResult, error) {
	a := s.applier()
	if listjobs.TagAction(in.Action) {
		// The job and the applier take the tag where they take a topic.
		in.Topic = strings.TrimSpace(in.Tag)
	}
	if err := a.Check(in.Action, in.Topic); err != nil {
		return BulkResult{}, bad("%v", err)
	}
	if (in.Filter == nil) == (in.Emails == nil) {
		return BulkResult{}, bad("give a filter or a list of emails (one of them)")
	}
	res := BulkResult{Action: in.Action}
	var emails []string
	var err error
	if in.Emails != nil {
		if emails, err = bulkEmails(in.Emails); err != nil {
			return res, err
		}
		res.Count = int64(len(emails))
	} else {
		n, err := s.selectionSize(ctx, in)
		if err != nil {
			return res, err
		}
		res.Count = n
	}
	if in.Action == listjobs.ActionErase && res.Count == 0 {
		// A job's cap of 0 would mean none: an empty selection now may
		// not be empty when the job runs.
		return res, bad("the selection is empty: nobody to erase")
	}
	if in.Action == listjobs.ActionErase && (in.Confirm == nil || *in.Confirm != res.Count) {
		return res, &ConfirmError{Count: res.Count}
	}
	if in.Filter != nil {
		return s.startBulkJob(ctx, in, res)
	}
	return s.applyToEach(ctx, a, in, emails, res)
}

// bulkEmails checks a bulk action's addresses: 1 to MaxBulkEmails,
// normalized, each once.
func bulkEmails(given []string) ([]string, error) {
	if len(given) == 0 || len(given) > MaxBulkEmails {
		return nil, bad("emails: 1 to %d addresses", MaxBulkEmails)
	}
	var emails []string
	for _, e := range given {
		n, err := address.Normalize(e)
		if err != nil {
			return nil, bad("emails: %q: %v", e, err)
		}
		if !slices.Contains(emails, n) {
			emails = append(emails, n)
		}
	}
	return emails, nil
}

// selectionSize is the size of in's filter, as its confirmation counts
// it.
func (s *Service) selectionSize(ctx context.Context, in BulkInput) (int64, error) {
	n, err := s.checkFilter(ctx, *in.Filter)
	if err != nil {
		return n, err
	}
	// An erasure is confirmed by the people it touches: a search's
	// count counts index entries (one person may match by address and
	// by name), so it is read, as a selection the indexes cannot count
	// is.
	if in.Action == listjobs.ActionErase && (n < 0 || in.Filter.Q != "") {
		return s.countSelection(ctx, *in.Filter)
	}
	return n, nil
}

// applyToEach makes a bulk action on a list of addresses at once: each
// person's change is the Applier's, as a job's would be; one audit entry
// says what the whole action did.
func (s *Service) applyToEach(ctx context.Context, a *listjobs.Applier, in BulkInput, emails []string, res BulkResult) (BulkResult, error) {
	for _, email := range emails {
		sub, err := s.Store.Get(ctx, email)
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
	if s.Audit != nil {
		// One entry for the whole action (see listjobs.AuditBulk).
		_ = s.Audit.Note(ctx, audit.Entry{Action: listjobs.AuditBulk, Target: fmt.Sprintf("addresses:%d", len(emails)),
			Detail: fmt.Sprintf("%s %s: %d changed, %d left as they were, %d not on the list", in.Action, in.Topic, res.Changed, res.Skipped, len(res.NotFound))}) // logged and counted by the Trail
	}
	return res, nil
}

// startBulkJob queues a bulk action on a filter as a list job: its
// selection is read when the job runs, an erasure capped at the count
// confirmed now.
func (s *Service) startBulkJob(ctx context.Context, in BulkInput, res BulkResult) (BulkResult, error) {
	who, role := actor(ctx)
	if s.ListJobs == nil {
		return res, &ListError{Code: http.StatusServiceUnavailable, Msg: "bulk actions on a filter need the worker's jobs, not configured here"}
	}
	job := listjobs.Job{Kind: listjobs.KindBulk, Filter: *in.Filter, Action: in.Action, Topic: in.Topic,
		Total: res.Count, By: who, Role: role, Created: s.now().UTC()}
	if in.Action == listjobs.ActionErase {
		job.Max = res.Count
	}
	job, err := s.ListJobs.Create(ctx, job)
	if err != nil {
		return res, err
	}
	if _, err := s.Queue.EnqueueContext(ctx, tasks.SubscribersBulk.New(tasks.ListJobPayload{ID: job.ID})); err != nil {
		return res, err
	}
	res.Job = &job
	return res, nil
}

// countSelection counts a selection by reading it (MaxEraseCount at most).
func (s *Service) countSelection(ctx context.Context, f store.Filter) (int64, error) {
	var n int64
	cursor := ""
	for {
		subs, next, err := s.Store.Select(ctx, f, cursor, store.MaxSubscriberPage)
		if err != nil {
			return 0, err
		}
		n += int64(len(subs))
		if n > MaxEraseCount {
			return 0, bad("the selection is over %d people: narrow it to erase", MaxEraseCount)
		}
		if next == "" {
			return n, nil
		}
		cursor = next
	}
}

// ListJob reads a job of kind; ErrNoJob for another kind's.
func (s *Service) ListJob(ctx context.Context, id, kind string) (listjobs.Job, error) {
	if s.ListJobs == nil {
		return listjobs.Job{}, listjobs.ErrNoJob
	}
	job, err := s.ListJobs.Get(ctx, id)
	if err == nil && job.Kind != kind {
		return listjobs.Job{}, listjobs.ErrNoJob
	}
	return job, err
}

// StartExport asks the worker for a CSV of the selection f
// (tasks.TypeExportRun); the job's id is its download's.
func (s *Service) StartExport(ctx context.Context, f store.Filter) (listjobs.Job, error) {
	n, err := s.checkFilter(ctx, f)
	if err != nil {
		return listjobs.Job{}, err
	}
	if s.ListJobs == nil {
		return listjobs.Job{}, &ListError{Code: http.StatusServiceUnavailable, Msg: "exports need the worker's jobs, not configured here"}
	}
	who, role := actor(ctx)
	job, err := s.ListJobs.Create(ctx, listjobs.Job{Kind: listjobs.KindExport, Filter: f, Total: n, By: who, Role: role, Created: s.now().UTC()})
	if err != nil {
		return job, err
	}
	if _, err := s.Queue.EnqueueContext(ctx, tasks.ExportRun.New(tasks.ListJobPayload{ID: job.ID})); err != nil {
		return job, err
	}
	return job, nil
}

// WriteExportCSV answers export id: 404 unknown or expired, 202 with the
// job while it runs, 500 with it when it failed, the CSV once done
// (chunk by chunk from Redis: the memory of one chunk).
func (s *Service) WriteExportCSV(w http.ResponseWriter, r *http.Request, id string) {
	ctx := r.Context()
	job, err := s.ListJob(ctx, id, listjobs.KindExport)
	switch {
	case errors.Is(err, listjobs.ErrNoJob):
		webjson.Write(w, http.StatusNotFound, errorBody("no such export (exports are kept 24 hours)"))
		return
	case err != nil:
		s.AnswerError(w, "export", err)
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
		b, err := s.ListJobs.Chunk(ctx, job.ID, i)
		if err != nil {
			// The status is sent: the download ends short, and the
			// client sees a truncated body (no final newline count).
			s.log().Error("export: read a chunk", "export", job.ID, "chunk", i, "err", err)
			return
		}
		if _, err := w.Write(b); err != nil {
			return // the client left
		}
	}
	s.note(ctx, "subscribers.export_downloaded", "export:"+job.ID, fmt.Sprintf("%d rows", job.Done))
}

// channelErasers are the channels' data as a bulk erasure forgets it.
func channelErasers(data []PersonData) []listjobs.ChannelEraser {
	out := make([]listjobs.ChannelEraser, len(data))
	for i, d := range data {
		out[i] = d
	}
	return out
}
