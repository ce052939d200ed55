// Package store owns the service's durable state: subscribers, the outbox of
// tasks that must reach the queue, and delivery marks that make a repeated
// task a no-op.
//
// Two implementations share one contract (store_test.go runs the same tests
// on both): Redis, for the service, and Memory, for handler unit tests.
//
// # Delivery marks and the one duplicate window
//
// Before a handler sends mail kind K for key P to subscriber S it claims the
// mark (K, P, S) with an expiry; after the SMTP server accepted the message
// it marks it sent. A retried or duplicated task finds "sent" and skips, or
// finds a live claim and retries later. A worker that dies between the
// server's 250 and MarkSent leaves a claim that expires, and the retry sends
// again: that window (one Redis round trip) is the only way a person can get
// a mail twice. A worker that dies before sending leaves the same claim, and
// the retry sends after it expires, so a crash never loses a mail.
package store
