// Package apns sends one notification to one iOS app install through the
// Apple Push Notification service's HTTP/2 API: a POST of the payload to
// /3/device/{token}, authorised by a provider token, an ES256 JWT signed
// with the team's .p8 key (kid the key's id, iss the team id, iat).
//
// The provider token is signed once and reused for tokenRefresh (50
// minutes): Apple refuses one older than an hour (403
// ExpiredProviderToken) and one replaced more often than about every 20
// minutes (429 TooManyProviderTokenUpdates). A 403 ExpiredProviderToken
// (our clock behind Apple's) signs a new one and retries once; many sends
// refused at once sign one token between them.
//
// Apple asks providers to keep few connections open and send many
// notifications on each. NewHTTPClient's transport (the default) does
// that with net/http alone: ForceAttemptHTTP2 negotiates HTTP/2 over TLS
// with a custom TLS config, and MaxConnsPerHost 1 makes concurrent first
// requests wait for the one connection being dialled rather than each
// dialling its own; HTTP/2 then multiplexes every request as a stream of
// that connection (up to the server's SETTINGS_MAX_CONCURRENT_STREAMS,
// beyond which net/http opens another).
//
// What it batches, and why: APNs has no batch request (one notification
// a POST), but it takes many requests at once as streams of one
// connection, and Apple asks for exactly that. So Channel.Send sends a
// batch (MaxBatch, 100) as concurrent requests and answers in the
// batch's order, and the Client caps what it has in flight, every
// batch's and caller's together, at MaxStreams (DefaultMaxStreams, 500:
// Apple advertises its limit, some 1000, and says not to count on a
// number). Until APNs has answered a request past its token check, the
// Client sends one request at a time: on a connection authorised by a
// provider token APNs allows one stream until a valid token has come
// ("Establishing a connection to APNs").
//
// APNs' answers map onto what a caller does next, as in package push:
// 410 (Unregistered, ExpiredToken) is push.ErrGone (delete the token,
// never retry); 429, 500, 503 and any other 5xx are push.ErrUnavailable
// with the Retry-After APNs sent (push.RetryAfter); anything else
// (BadTopic, InvalidProviderToken, PayloadTooLarge, and BadDeviceToken
// and DeviceTokenNotForTopic, which a wrong environment or topic setting
// makes every device answer: gone would delete them all) is
// push.ErrRefused.
// push.Permanent works on all of them. A network error or a timeout is
// none of these: retry it.
package apns
