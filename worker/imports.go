package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/csvimport"
	"github.com/newsletter/newsletter/tasks"
)

// Auditor records a change in the audit log (*audit.Trail: a failed
// write is logged whole and counted there).
type Auditor interface {
	Note(ctx context.Context, e audit.Entry) error
}

// ImportRunner runs the console's imports (import:run): the uploaded file
// from its last checkpoint to its end, through the same csvimport.Importer
// as `newsletter import`.
type ImportRunner struct {
	Jobs   *csvimport.Jobs
	Store  csvimport.Store
	Queue  tasks.Enqueuer
	Topics topics.Source
	Audit  Auditor // nil: no entry
	Now    func() time.Time
	Log    *slog.Logger
	// Batch is the importer's batch (0: csvimport.Batch).
	Batch int
}

// HandleImportRun reads one job. A store error is retried from the last
// checkpoint (rows stored after it count as already present, never twice);
// a file whose lines do not add up, and the last retry, end the job as
// failed. The audit entry is written by the run that ends the job.
func (r *ImportRunner) HandleImportRun(ctx context.Context, p tasks.ImportRunPayload) error {
	st, err := r.Jobs.Status(ctx, p.ID)
	if errors.Is(err, csvimport.ErrNoJob) {
		return fmt.Errorf("import %s: expired or deleted: %w", p.ID, asynq.SkipRetry)
	}
	if err != nil {
		return err
	}
	if st.State != csvimport.StateRunning {
		return nil // ended by an earlier run
	}
	data, err := r.Jobs.Data(ctx, p.ID)
	if errors.Is(err, csvimport.ErrNoJob) {
		return r.finish(ctx, st, st.Progress, errors.New("the uploaded file is gone (expired)"))
	}
	if err != nil {
		return err
	}
	// saved is the last checkpoint: every line up to its Line is stored.
	// The importer's running progress (im.Progress) is not: it counts the
	// lines of the batch that failed, which the retry must read again.
	saved := st.Progress
	im := &csvimport.Importer{Store: r.Store, Queue: r.Queue, Pending: st.Pending, Now: r.Now, Topics: r.Topics, Batch: r.Batch, Mapping: st.Mapping,
		Checkpoint: func(ctx context.Context, prog csvimport.Progress) error {
			if err := r.Jobs.Checkpoint(ctx, p.ID, prog, ""); err != nil {
				return err
			}
			saved = prog
			return nil
		}}
	prog, err := im.Run(ctx, bytes.NewReader(data), st.Lines, st.Progress)
	if err == nil || errors.Is(err, csvimport.ErrIncomplete) || lastTry(ctx) {
		return r.finish(ctx, st, prog, err)
	}
	if ctx.Err() == nil {
		// Shown on the page while the retry waits, beside the checkpoint
		// the retry resumes from.
		if cerr := r.Jobs.Checkpoint(context.WithoutCancel(ctx), p.ID, saved, err.Error()); cerr != nil {
			r.Log.Warn("import: the retry's reason was not saved", "import", p.ID, "err", cerr)
		}
	}
	return fmt.Errorf("import %s (resumes from its checkpoint): %w", p.ID, err)
}

// finish ends the job, done or failed with runErr, and audits its counts.
func (r *ImportRunner) finish(ctx context.Context, st csvimport.Status, prog csvimport.Progress, runErr error) error {
	state, problem := csvimport.StateDone, ""
	if runErr != nil {
		state, problem = csvimport.StateFailed, runErr.Error()
		r.Log.Error("import stopped", "import", st.ID, "err", runErr)
	}
	ended, err := r.Jobs.Finish(ctx, st.ID, prog, state, problem)
	if err != nil {
		return err // retried: the end is saved by the next run
	}
	if ended && r.Audit != nil {
		detail := fmt.Sprintf("%s: %s (%s)", st.File, prog.Detail(st.Pending), state)
		_ = r.Audit.Note(ctx, audit.Entry{Actor: st.By, Role: st.Role, Action: audit.Imported, Target: "import:" + st.ID, Detail: detail}) // logged and counted by the Trail
	}
	if runErr != nil {
		return fmt.Errorf("import %s: %w: %w", st.ID, runErr, asynq.SkipRetry)
	}
	return nil
}
