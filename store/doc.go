// Package store owns the service's durable state: subscribers, the outbox of
// tasks that must reach the queue, and delivery marks that make a repeated
// task a no-op.
//
// The store comes in parts, so each consumer names only what it uses:
// Subscribers (the list and its state changes), Outbox, Marks (delivery
// marks), Digests, Suppressions and PushSubscriptions (each subscriber's
// browsers for web push); Store is all of them. Redis implements it (every
// state change one Lua script, above the method that runs it; the
// preludes they share in scripts.go; the key layout in keys.go, where
// every key is built) and passes the contract suite (store/storetest).
// Its files go by domain, each named for the keys it owns
// (subscriptions.go, holds.go, outbox.go, marks.go, people.go, stats.go,
// issues.go, issue_sending.go, digest.go, items.go, audience.go,
// segments.go, feeds.go, engagement.go, phones.go, devices.go, push.go,
// webhooks.go, feedback.go, accounts.go, catalog.go …). It is the one
// store: tests run on it over Redis or miniredis, with
// internal/testkit/redisfault to take Redis away.
//
// # Delivery marks and the one duplicate window
//
// Before a handler sends mail kind K for key P to subscriber S it claims the
// mark (K, P, S) with an expiry; after the SMTP server accepted the message
// it marks it sent. A retried or duplicated task finds "sent" and skips, or
// finds a live claim and retries later. A worker that dies between the
// server's 250 and MarkSent leaves a claim that expires, and the retry sends
// again: that window is the only way a person can get a mail twice, and the
// worker bounds how many mails may be in it at once (docs/architecture.md).
// A worker that dies before sending leaves the same claim, and the retry
// sends after it expires, so a crash never loses a mail.
package store
