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
