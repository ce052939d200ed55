// Package webhook tells an admin's own systems what happened, as the
// Standard Webhooks specification (1.0) says: one JSON event
// ({"type","timestamp","data"}) POSTed to one endpoint with the headers
// webhook-id (the event's id, the same on every retry and for every
// endpoint: the receiver's idempotency key), webhook-timestamp (the
// attempt's, in unix seconds) and webhook-signature ("v1," and the base64
// HMAC-SHA256 of "id.timestamp.body" under the endpoint's secret, which is
// "whsec_" and base64 of random bytes).
//
// This package is delivery only: the signature (sign.go), one delivery
// (send.go) and the channel the lane holds (channel.go: its Spec, and the
// Outcome of each answer, Classify). The event vocabulary (tasks.WebhookEvent and its
// types), the retry schedule (tasks.WebhookBackoff), which endpoints want
// an event and the task per endpoint are in tasks; the handler that runs
// that task, counts failures and disables an endpoint is in worker; the
// endpoints are kept by the store (store.Webhooks).
//
// What it batches, and why: nothing. The specification delivers one
// event a POST to one endpoint, each endpoint an admin's own server that
// answers (and is retried, and disabled) on its own, and each delivery a
// task of its own in tasks; so Channel's MaxBatch is 1 and it sends with
// channels.OneByOne.
package webhook
