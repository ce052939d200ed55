// Package listjobs runs the list's long jobs: a bulk action on a filtered
// selection of the subscribers (tasks.TypeSubscribersBulk) and the CSV
// export of one (tasks.TypeExportRun). A job's state lives in Redis, so
// the API that started it, the worker that runs it and a worker that
// takes it over after a restart all see the same; the worker saves its
// cursor after every page, and an export its CSV, chunk by chunk, with
// the cursor in the same step: a retry resumes where the last run saved.
package listjobs
