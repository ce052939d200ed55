// Package tasks defines the asynq task types, their payloads and options,
// and the worker that handles them: handlers, retry policy, logging and
// metrics middleware, and the outbox relay.
//
// Constructors (NewConfirm, NewWelcome, ...) return a Job that carries the
// task with all its options, so the API, the relay and the tests enqueue one
// definition. Handlers are methods on Handlers, which depends only on small
// interfaces (store.Store, mailer.Mailer, a clock), so their logic is
// tested without Redis.
//
// Every handler follows one path: decode (bad payload: SkipRetry), re-read
// the subscriber right before sending (not active: skip, nil), claim the
// delivery mark, send, mark sent.
package tasks
