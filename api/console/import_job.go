package console

import (
	"github.com/newsletter/newsletter/services/csvimport"
)

// An import is a job of the worker (tasks.TypeImportRun): the upload is
// stored in Redis with its status (csvimport.Jobs), so any API replica
// shows it and a restart of either role resumes it from its checkpoint.

// importPage is one import as its page shows it.
type importPage struct{ csvimport.Status }

// Percent is how much of the file was read, 0 to 100.
func (s importPage) Percent() int64 {
	if s.Lines <= 0 {
		return 0
	}
	return min(100, 100*s.Line/s.Lines)
}
