// Package worker handles the tasks of package tasks: the asynq server of
// the worker role with its middleware (one log line and the metrics per
// task), retry policy, pacing and the components that send mail.
//
// Every mail, whatever its kind, goes through one Deliverer: re-read the
// subscriber right before sending (not active: skip), claim the delivery
// mark (already sent: skip; held by another run: retry later), pace (the
// shared send rate, domains that asked us to slow down), render, send,
// mark sent. The components around it hold only what they use:
//
//   - Mails: the confirmation and the welcome.
//   - Planner: digest:plan records the period's run and sends its items
//     as an issue (digest-<period>).
//   - IssueSender: issue:plan walks an issue's audience by id and enqueues
//     batches, with back pressure on the critical queue; email:issue sends
//     a batch over one SMTP session, holding those in quiet hours for
//     later.
//   - EventSender and Aggregator: a person's events bundled into one mail.
//
// The components are built by NewHandlers alone, which gives every
// setting left zero its default once (Deps.withDefaults), so their fields
// are set when they run and never checked for nil; routes.go registers
// each one's task types. Handlers depend on small interfaces of the store
// and the mailer. Their
// tests run on store.Redis over Redis or miniredis
// (internal/testkit/redisfault takes Redis away for the outage tests), and
// the delivery paths over real SMTP.
package worker
