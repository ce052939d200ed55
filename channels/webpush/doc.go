// Package webpush sends one web push notification: the HTTP request of RFC
// 8030 to the endpoint a browser's push service handed out, its payload
// encrypted for that browser (RFC 8291, content coding aes128gcm of RFC
// 8188), signed for the push service with the operator's VAPID key (RFC
// 8292, an ES256 JWT).
//
// It is written on the standard library (crypto/ecdh, crypto/hkdf,
// crypto/ecdsa) rather than on github.com/SherClockHolmes/webpush-go,
// the Go library in common use: that one prefixes a "mailto:" subject a
// second time (Apple's push service refuses the JWT), ignores its own JWT
// expiry option, signs a fresh JWT for every message, pads every message to
// 4 KB and pulls in a JWT module for one ES256 signature. What the RFCs ask
// is small; the tests hold it to RFC 8291's worked example, and the test
// push service (internal/testkit/pushtest) decrypts every message with the
// browser's keys by code of its own.
//
// The answers of a push service map onto what a caller does next: 404 and
// 410 are ErrGone (delete the subscription, never retry), 429 and 5xx are
// ErrUnavailable with the Retry-After the service asked for (RetryAfter),
// other refusals are ErrRefused (permanent). A network error or a timeout
// is none of these: retry it.
//
// Connections go through a netguard client: endpoints are URLs that
// browsers (so anyone) hand in, and must not reach this machine or its
// private network.
//
// What it batches, and why: nothing, by choice. RFC 8030 takes one
// message a POST, and every subscription is at an endpoint of its own,
// each browser's push service (Google's, Mozilla's, Apple's, ...), so a
// batch shares neither a request nor, mostly, a connection: concurrent
// sends would gain only what the lane's concurrency gives already, and
// the lane gates each push service apart (worker.ServiceGates), which a
// batch spread over several services would step around. One person's
// browsers are a few. So Channel's MaxBatch is 1 and it sends with
// channels.OneByOne; the requests to one push service share its HTTP/2
// connection through the client's transport all the same.
//
// Mobile apps are reached through their platforms' services instead:
// push/fcm (Firebase Cloud Messaging, Android) and push/apns (Apple). Their
// errors are classed as these are (ErrGone, ErrUnavailable, ErrRefused),
// so Permanent and RetryAfter serve all three senders.
package webpush
