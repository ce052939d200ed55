// Package audit is the record of who changed what: every change made
// through the API, the console or a command (an issue sent, a suppression
// lifted, a subscriber erased, a token made, a digest run, an import) is
// one Entry with its actor (a token's name, "admin-token" for
// NEWSLETTER_ADMIN_TOKEN, "cli:<user>" for a command), the actor's role,
// the action, the target and when. The store keeps the entries in a capped
// log (a Redis stream of at most about MaxEntries, newest first when read).
//
// No address is ever written in clear: a target that is a person is
// Subscriber(hash, address), the keyed hash the logs show of it
// (internal/logredact), so the log tells people apart without naming them
// and an erasure leaves nothing of the address behind.
//
// # When an entry cannot be written
//
// An entry is written after its change succeeded, never before: an entry
// written first would stand for changes that then failed (a 409, a bad
// field), and the log would say things happened that did not. If the
// write fails after the change, the change stands (the client is told so;
// failing the request then would make it retry a change that was made),
// and the Trail does not let it pass silently: it logs the whole entry at
// error level, so it is kept in the service's logs, and counts it in
// newsletter_audit_write_failures_total, which an alert watches. The log
// and the change live in the same Redis, so a change that succeeded and
// an entry that failed are a narrow window, not a way around the log.
package audit
