package sms

import (
	"context"

	"github.com/newsletter/newsletter/channels"
)

// Name is the sms channel's name: its lane, its metrics' channel label and
// its delivery marks' kind.
const Name = "sms"

// Gateway sends one text and answers the gateway's message SID (*Client).
type Gateway interface {
	Send(ctx context.Context, to, body string) (sid string, err error)
}

// Channel is the sms channel as the worker holds it: one text per
// Message (To: an E.164 number, Body: the text, no Attrs), one POST each,
// so MaxBatch is 1. A text's cap is in segments, the operator's setting
// (CheckLength), not in bytes: MaxBody is 0.
type Channel struct {
	Gateway Gateway
}

var _ channels.Channel = Channel{}

// Spec declares the channel.
func (Channel) Spec() channels.Spec { return channels.Spec{Name: Name, MaxBatch: 1} }

// Send texts each message in turn and answers its Outcome (Classify). A
// canceled ctx answers Retry for what was not sent.
func (c Channel) Send(ctx context.Context, batch []channels.Message) []channels.Outcome {
	return channels.OneByOne(ctx, batch, func(ctx context.Context, m channels.Message) channels.Outcome {
		return Classify(c.Gateway.Send(ctx, m.To, string(m.Body)))
	})
}

// Classify is the Outcome of the gateway's answer to one text: taken is
// Sent (with its SID); ErrNumberGone retires the number; ErrRefused (bad
// credentials included: a text is never held for an operator's fix)
// drops the text; anything else (429, 5xx, a network error, a timeout)
// is retried, no sooner than the gateway's Retry-After.
func Classify(sid string, err error) channels.Outcome {
	switch {
	case err == nil:
		return channels.Outcome{Verdict: channels.Sent, ProviderID: sid}
	case Retire(err):
		return channels.Outcome{Verdict: channels.Retire, Err: err}
	case Permanent(err):
		return channels.Outcome{Verdict: channels.Drop, Err: err}
	}
	return channels.Outcome{Verdict: channels.Retry, After: RetryAfter(err), Err: err}
}
