// Package fcm sends one notification to one Android (or any Firebase)
// app install through Firebase Cloud Messaging's HTTP v1 API: a POST of
// the message to /v1/projects/{project}/messages:send, authorised by an
// OAuth 2 access token that the project's service account obtains by
// signing a JWT (RS256, with the account's key) and exchanging it at the
// account's token_uri.
//
// The exchange is golang.org/x/oauth2/jwt's: it signs the assertion
// (iss the account's e-mail, scope firebase.messaging, aud the token URI,
// exp an hour after iat, kid the key's id) and reads the answer. The token
// is cached by oauth2's reusing token source, which refreshes it
// refreshEarly before it expires and lets one caller at a time refresh, so
// a burst of sends makes one exchange. A 401 from FCM (the token revoked
// or expired early) drops the cached token and retries the message once.
//
// FCM's answers map onto what a caller does next, as in package push:
// an FcmError detail UNREGISTERED (with its 404) alone is push.ErrGone
// (delete the token, never retry), as firebase-admin-go's IsUnregistered;
// a bare 404 or an INVALID_ARGUMENT is a refusal; QUOTA_EXCEEDED
// (429), INTERNAL (500), UNAVAILABLE (503) and any other 5xx are
// push.ErrUnavailable with the Retry-After FCM asked for
// (push.RetryAfter); SENDER_ID_MISMATCH, THIRD_PARTY_AUTH_ERROR and any
// other refusal are push.ErrRefused. push.Permanent works on all of them.
// A network error or a timeout is none of these: retry it.
//
// What it batches, and why: HTTP v1 takes one message a request, and its
// batch endpoint (multipart requests to /batch) was removed in 2024;
// Google's answer is concurrent requests over HTTP/2. So Channel.Send
// sends a batch (MaxBatch, 100) as concurrent requests and answers in
// the batch's order, and the Client caps what it has in flight, every
// batch's and caller's together, at MaxStreams (DefaultMaxStreams, 100,
// the concurrent streams fcm.googleapis.com advertises a connection).
// NewHTTPClient, the default, keeps them on one connection.
package fcm
