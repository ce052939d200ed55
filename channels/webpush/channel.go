package webpush

import (
	"context"
	"errors"
	"fmt"

	"github.com/newsletter/newsletter/channels"
)

// Name is the web push channel's name in its Spec.
const Name = "webpush"

// The Attrs a web push Message carries beside its endpoint (To) and its
// plaintext (Body): the browser's keys, as browsers write them
// (base64url), which the payload is encrypted for.
const (
	AttrP256DH = "p256dh"
	AttrAuth   = "auth"
)

// Channel is the web push channel as the worker holds it: one
// notification to one browser per Message (To: the subscription's
// endpoint, Body: the notification's JSON, Notification.Payload; Attrs:
// AttrP256DH and AttrAuth). RFC 8030 takes one message per POST, so
// MaxBatch is 1; MaxBody is MaxPayload, the plaintext that fits the
// 4096-byte record every push service must take.
type Channel struct {
	Sender Sender
}

var _ channels.Channel = Channel{}

// Spec declares the channel.
func (Channel) Spec() channels.Spec {
	return channels.Spec{Name: Name, MaxBatch: 1, MaxBody: MaxPayload}
}

// Send sends each message in turn and answers its Outcome (Classify). A
// canceled ctx answers Retry for what was not sent.
func (c Channel) Send(ctx context.Context, batch []channels.Message) []channels.Outcome {
	return channels.OneByOne(ctx, batch, func(ctx context.Context, m channels.Message) channels.Outcome {
		s, err := subscriptionOf(m)
		if err == nil {
			err = c.Sender.Send(ctx, s, m.Body, Options{})
		}
		return Classify(err)
	})
}

// subscriptionOf is the subscription a Message addresses; keys that do
// not decode are ErrBadSubscription, which drops the message.
func subscriptionOf(m channels.Message) (Subscription, error) {
	p256dh, err := decodeKey(m.Attrs[AttrP256DH])
	if err != nil {
		return Subscription{}, fmt.Errorf("%w: p256dh: %v", ErrBadSubscription, err)
	}
	auth, err := decodeKey(m.Attrs[AttrAuth])
	if err != nil {
		return Subscription{}, fmt.Errorf("%w: auth: %v", ErrBadSubscription, err)
	}
	return Subscription{Endpoint: m.To, P256DH: p256dh, Auth: auth}, nil
}

// Classify is the Outcome of one send's error, by its class: nil (2xx)
// is Sent; ErrGone (404, 410) retires the subscription; any other
// permanent error (ErrRefused: 400, 401/403, 413, a redirect;
// ErrBadSubscription; ErrTooLarge) drops the message and keeps the
// subscription; anything else (ErrUnavailable: 429, 5xx; a network
// error, a timeout) is retried, no sooner than the service's Retry-After.
// The mobile platforms' errors are classed alike (fcm.Classify,
// apns.Classify).
func Classify(err error) channels.Outcome {
	switch {
	case err == nil:
		return channels.Outcome{Verdict: channels.Sent}
	case errors.Is(err, ErrGone):
		return channels.Outcome{Verdict: channels.Retire, Err: err}
	case Permanent(err):
		return channels.Outcome{Verdict: channels.Drop, Err: err}
	}
	return channels.Outcome{Verdict: channels.Retry, After: RetryAfter(err), Err: err}
}
