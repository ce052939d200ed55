// Package api is the HTTP side of the service: the signup form, confirm and
// unsubscribe links (including RFC 8058 one-click), the admin API, health
// checks and metrics.
//
// The API writes the store and enqueues tasks; it never sends mail. Every
// state change goes through the store's outbox first, so an enqueue that
// fails after the write is picked up by the worker's relay instead of lost.
package api
