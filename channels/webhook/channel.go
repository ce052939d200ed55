package webhook

import (
	"context"
	"errors"

	"github.com/newsletter/newsletter/channels"
)

// Name is the webhook channel's name: its lane, its metrics' channel
// label.
const Name = "webhook"

// The Attrs a webhook Message carries beside its endpoint (To) and its
// event (Body).
const (
	// AttrID is the event's webhook-id, the receiver's idempotency key.
	AttrID = "id"
	// AttrSecret is the endpoint's signing secret ("whsec_…").
	AttrSecret = "secret"
)

// Poster posts one event to one endpoint and answers the endpoint's
// status code (*Sender).
type Poster interface {
	Post(ctx context.Context, endpoint, secret string, m Message) (int, error)
}

// Channel is the webhook channel as the worker holds it: one event to
// one endpoint per Message (To: the endpoint's URL, Body: the event's
// JSON, Attrs: AttrID and AttrSecret), one POST each, so MaxBatch is 1.
// An event is the admin's own data of a few hundred bytes and the
// specification sets no cap: MaxBody is 0.
type Channel struct {
	Poster Poster
}

var _ channels.Channel = Channel{}

// Spec declares the channel.
func (Channel) Spec() channels.Spec { return channels.Spec{Name: Name, MaxBatch: 1} }

// Send posts each message in turn and answers its Outcome (Classify). A
// canceled ctx answers Retry for what was not sent.
func (c Channel) Send(ctx context.Context, batch []channels.Message) []channels.Outcome {
	return channels.OneByOne(ctx, batch, func(ctx context.Context, m channels.Message) channels.Outcome {
		_, err := c.Poster.Post(ctx, m.To, m.Attrs[AttrSecret], Message{ID: m.Attrs[AttrID], Body: m.Body})
		return Classify(err)
	})
}

// Classify is the Outcome of one delivery's error (Post's or Send's):
// nil (a 2xx) is Sent; ErrSecret drops the event, as no attempt can sign
// it while the endpoint keeps that secret; 410 Gone retires the endpoint,
// as the specification says to disable it; anything else (another
// status, a refused connection, a timeout) is retried, no sooner than the
// endpoint's Retry-After.
func Classify(err error) channels.Outcome {
	if err == nil {
		return channels.Outcome{Verdict: channels.Sent}
	}
	if errors.Is(err, ErrSecret) {
		return channels.Outcome{Verdict: channels.Drop, Err: err}
	}
	r := AsRefused(err)
	if r != nil && r.Gone() {
		return channels.Outcome{Verdict: channels.Retire, Err: err}
	}
	out := channels.Outcome{Verdict: channels.Retry, Err: err}
	if r != nil {
		out.After = r.Wait
	}
	return out
}
