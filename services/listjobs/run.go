package listjobs

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// The audit actions of the list's jobs: one entry per bulk action and per
// export when it ends, with its counts, not one per person. A bulk
// action on a million would otherwise push the rest of the audit log
// (capped at audit.MaxEntries) out; the entry names the selection, so
// who it touched can be told from the list at that time.
const (
	AuditBulk   = "subscribers.bulk"
	AuditExport = "subscribers.exported"
)

// Page is how many people a run reads and acts on between two saves
// (a search's pages are 500 at most: store.MaxSubscriberPage).
const Page = 2000

// ChunkSize is about how many bytes of CSV an export keeps per chunk:
// the run's and the download's memory is about one chunk, whatever the
// list's size.
const ChunkSize = 256 << 10

// Selection is what a run reads of the store.
type Selection interface {
	Select(ctx context.Context, f store.Filter, cursor string, limit int) ([]store.Subscriber, string, error)
	ConsentsOf(ctx context.Context, ids []int64) ([]store.Consent, error)
	FieldDefs(ctx context.Context) ([]store.FieldDef, error)
}

// Auditor records the end of a job (*audit.Trail).
type Auditor interface {
	Note(ctx context.Context, e audit.Entry) error
}

// Runner runs the jobs (the worker's handlers of tasks.TypeSubscribersBulk
// and tasks.TypeExportRun).
type Runner struct {
	Jobs    *Jobs
	Store   Selection
	Applier *Applier
	Audit   Auditor // nil: no entry
	Now     func() time.Time
	Log     *slog.Logger
	// Page is the run's page (0: Page).
	Page int
}

func (r *Runner) page() int {
	if r.Page > 0 {
		return r.Page
	}
	return Page
}

// Run runs job id to its end (or until a store error: the caller's
// retry resumes from the cursor saved). An ended job is left as it is.
func (r *Runner) Run(ctx context.Context, id string) error {
	job, err := r.Jobs.Get(ctx, id)
	if err != nil {
		return err
	}
	if job.State != StateRunning {
		return nil
	}
	switch job.Kind {
	case KindBulk:
		err = r.bulk(ctx, &job)
	case KindExport:
		err = r.export(ctx, &job)
	default:
		err = fmt.Errorf("unknown job kind %q", job.Kind)
	}
	if err != nil {
		return err
	}
	return r.finish(ctx, job, "")
}

// Fail ends a job as failed with why (the last retry's error).
func (r *Runner) Fail(ctx context.Context, id string, why error) error {
	job, err := r.Jobs.Get(ctx, id)
	if err != nil || job.State != StateRunning {
		return err
	}
	return r.finish(ctx, job, why.Error())
}

// Note saves why a running job waits for its retry (shown with its
// progress).
func (r *Runner) Note(ctx context.Context, id string, why error) {
	job, err := r.Jobs.Get(ctx, id)
	if err == nil && job.State == StateRunning {
		job.Error = why.Error()
		err = r.Jobs.Save(ctx, job)
	}
	if err != nil {
		r.Log.Warn("list job: the retry's reason was not saved", "job", id, "err", err)
	}
}

func (r *Runner) finish(ctx context.Context, job Job, failed string) error {
	job.State, job.Ended, job.Error = StateDone, r.Now().UTC(), failed
	if failed != "" {
		job.State = StateFailed
	}
	if err := r.Jobs.Save(ctx, job); err != nil {
		return err
	}
	if r.Audit == nil {
		return nil
	}
	e := audit.Entry{Actor: job.By, Role: job.Role, Target: "selection:" + describe(job.Filter)}
	switch job.Kind {
	case KindBulk:
		e.Action = AuditBulk
		e.Detail = fmt.Sprintf("%s%s (job %s, %s): %d read, %d changed, %d left as they were", job.Action, topicNote(job.Topic), job.ID, job.State, job.Done, job.Changed, job.Skipped)
	default:
		e.Action = AuditExport
		e.Detail = fmt.Sprintf("CSV export (job %s, %s): %d rows", job.ID, job.State, job.Done)
	}
	if failed != "" {
		e.Detail += ": " + failed
	}
	_ = r.Audit.Note(ctx, e) // logged and counted by the Trail
	return nil
}

func topicNote(t string) string {
	if t == "" {
		return ""
	}
	return " " + t
}

// describe is a filter in one line (the audit entry's target).
func describe(f store.Filter) string {
	s := "status=" + string(f.Status) + " topic=" + f.Topic + " q=" + f.Q
	if f == (store.Filter{}) {
		s = "all"
	}
	return s
}

// bulk applies the job's action page by page, saving the cursor after
// each. An erasure stops at job.Max people erased, the count the admin
// confirmed: a selection grown since is not erased beyond it.
func (r *Runner) bulk(ctx context.Context, job *Job) error {
	for {
		subs, next, err := r.Store.Select(ctx, job.Filter, job.Cursor, r.page())
		if err != nil {
			return err
		}
		for _, sub := range subs {
			if job.Action == ActionErase && job.Max > 0 && job.Changed >= job.Max {
				job.Skipped++
				continue
			}
			changed, err := r.Applier.Apply(ctx, job.Action, job.Topic, sub)
			if err != nil {
				// The page is applied again on the retry: every action
				// is safe twice.
				return err
			}
			if changed {
				job.Changed++
			} else {
				job.Skipped++
			}
		}
		job.Done += int64(len(subs))
		job.Cursor = next
		if err := r.Jobs.Save(ctx, *job); err != nil {
			return err
		}
		if next == "" {
			return nil
		}
	}
}

// export writes the selection as CSV, page by page, into chunks of about
// ChunkSize; each chunk is saved with the cursor after it.
func (r *Runner) export(ctx context.Context, job *Job) error {
	var buf bytes.Buffer
	first := job.Chunks == 0 && job.Done == 0
	if first {
		// The custom fields' columns are fixed when the header is
		// written; a retry writes the rest of the file with the same.
		defs, err := r.Store.FieldDefs(ctx)
		if err != nil {
			return err
		}
		job.Fields = make([]string, len(defs))
		for i, d := range defs {
			job.Fields[i] = d.Name
		}
	}
	w := newCSVWriter(&buf, ColumnsWith(job.Fields))
	if first {
		if err := w.header(); err != nil {
			return err
		}
	}
	for {
		subs, next, err := r.Store.Select(ctx, job.Filter, job.Cursor, r.page())
		if err != nil {
			return err
		}
		ids := make([]int64, len(subs))
		for i, s := range subs {
			ids[i] = s.ID
		}
		consents, err := r.Store.ConsentsOf(ctx, ids)
		if err != nil {
			return err
		}
		for i, s := range subs {
			if err := w.row(Row{Subscriber: s, Consent: consents[i]}); err != nil {
				return err
			}
		}
		if err := w.flush(); err != nil {
			return err
		}
		job.Done += int64(len(subs))
		job.Cursor = next
		if buf.Len() >= ChunkSize || next == "" {
			job.Chunks++
			job.Bytes += int64(buf.Len())
			if buf.Len() == 0 {
				job.Chunks--
			}
			if err := r.Jobs.SaveChunk(ctx, *job, buf.Bytes()); err != nil {
				return err
			}
			buf.Reset()
		}
		if next == "" {
			return nil
		}
	}
}
