package apns

import (
	"context"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/webpush"
)

// Name is the APNs channel's name in its Spec.
const Name = "apns"

// Sender sends one notification to one app install (*Client).
type Sender interface {
	Send(ctx context.Context, deviceToken string, n Notification) error
}

// Channel is the APNs channel as the worker holds it: one notification
// to one app install per Message (To: the device token, Body: the
// notification's JSON, {"title","body","url"} as webpush.Notification
// writes it; no Attrs). APNs takes one notification per request and has
// no batch request, but takes many requests at once as concurrent
// streams of one HTTP/2 connection: Send sends a batch of up to MaxBatch
// so, all at once, and the Client keeps its connection's cap
// (Client.MaxStreams) over every batch and caller. MaxBody is MaxPayload
// (4096 bytes).
type Channel struct {
	Sender Sender
}

// MaxBatch is how many notifications one Send takes: a person's devices
// are a few, and a batch of 100 waits for its slowest answer, no longer
// than the Client's timeout.
const MaxBatch = 100

var _ channels.Channel = Channel{}

// Spec declares the channel.
func (Channel) Spec() channels.Spec {
	return channels.Spec{Name: Name, MaxBatch: MaxBatch, MaxBody: MaxPayload}
}

// Send sends the batch's messages at once (webpush.SendApps) and answers
// each its Outcome (Classify), in the batch's order.
func (c Channel) Send(ctx context.Context, batch []channels.Message) []channels.Outcome {
	return webpush.SendApps(ctx, Name, batch, func(ctx context.Context, to string, n webpush.Notification) error {
		return c.Sender.Send(ctx, to, Notification{Title: n.Title, Body: n.Body, URL: n.URL})
	}, Classify)
}

// Classify is the Outcome of APNs' answer to one notification. The
// answer's class (Error.Unwrap, the push classes) decides, so the mapping
// is web push's (webpush.Classify):
//
//   - nil (200): Sent;
//   - 410 (Unregistered, ExpiredToken), and a token that is not one
//     (ErrBadToken): Retire, the device is deleted;
//   - 429 TooManyRequests and 5xx: Retry, no sooner than Retry-After (at
//     most webpush.MaxRetryAfter);
//   - any other answer, 400 BadDeviceToken and DeviceTokenNotForTopic
//     included (Apple answers them for every device of the other
//     environment or a wrong topic, parseError), and a notification too
//     large: Drop, the device stays;
//   - a network error or a timeout: Retry on the lane's backoff.
func Classify(err error) channels.Outcome { return webpush.Classify(err) }
