// Package console is the publisher's console at /admin/: server-rendered
// pages for the subscribers, segments, issues, items, suppressions,
// imports, the audit log and the tokens, signed in with a token and kept
// by a session.
//
// It is laid out as miniflux's internal/ui: one action per file
// (issue_save.go, suppression_lift.go, …), the form subpackage turning a
// request into a typed value, and one routes file (routes.go) that says
// which role each action needs. Every action is a plain HTML form that
// works without JavaScript; console.js only enhances (a live preview, a
// segment's count as its expression is typed, progress that updates
// itself).
//
// The console changes nothing by itself: each action calls the same
// store, enqueue and check functions as its /api/ route (the issues service,
// issues.Change, issues.CheckContent, csvimport, …), needs the same role,
// and is recorded in the audit log.
//
// Sign-in: a token (NEWSLETTER_ADMIN_TOKEN or one made with `newsletter
// token create`) is exchanged for a session cookie (HttpOnly,
// SameSite=Strict, Secure under https, 12 hours). The session lives in
// Redis under the hash of its id, and each request checks that its token
// still holds, so a logout or a revoked token ends it at once. Wrong
// tokens spend the same failure budget as the API's guard. Every form is
// protected against cross-site requests by net/http's
// CrossOriginProtection, beside the cookie's SameSite=Strict.
package console
