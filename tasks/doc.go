// Package tasks is the job vocabulary that producers (the API, the
// scheduler, `newsletter import`) and the worker share: task type names,
// queues and their weights, payloads, TaskIDs, constructors with every
// option, the outbox codec, dispatch and the outbox relay. It depends on
// asynq and store only; the worker that handles these tasks is
// tasks/worker, and the cron that starts the digest is tasks/schedule.
//
// Constructors (NewConfirm, NewWelcome, ...) return a Job, or a task, that
// carries all its options, so every producer enqueues one definition.
// Mails that a state change calls for (the confirmation, the welcome) are
// written to the store's outbox in the same step as the change, then
// dispatched; the relay enqueues what a crash left behind.
package tasks
