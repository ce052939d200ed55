// Package channels is the seam between the worker's lanes and the
// providers. Each sub-package (email, webpush, fcm, apns, sms, webhook) is
// one channel: it speaks its provider's wire format, knows the provider's
// payload limits, credential lifetimes and error classes, parses what the
// provider reports later (bounces, STOP, delivery status), and keeps its
// fake in a test package beside it. It answers every message with an
// Outcome, so the lanes (fan-out, order per person, rate, breaker,
// metrics) are written once, over Channel, and a lane is built from what
// its channel declares in its Spec.
//
// The package imports nothing of the project: a channel never reads the
// store or queues a task; the worker applies its outcomes and the service
// applies its reports.
package channels

import (
	"context"
	"sync"
	"time"
)

// Message is one message to one address of a channel.
type Message struct {
	// To is where it goes, in the channel's own terms: an e-mail address,
	// a browser subscription, an app token, a phone number, a URL.
	To string
	// Body is what the channel's wire format carries: a composed mail, a
	// notification's JSON, a text, an event.
	Body []byte
	// Attrs are the few fields a channel reads beside the body (a
	// webhook's secret, a push's urgency); each channel documents its keys.
	Attrs map[string]string
}

// Verdict is what the provider's answer means for a message and its
// address.
type Verdict uint8

const (
	// Sent: the provider accepted the message.
	Sent Verdict = iota
	// Retry: try the message again, no sooner than Outcome.After (zero:
	// the lane's own backoff).
	Retry
	// Retire: the address, token or number is dead; stop using it.
	Retire
	// Drop: this message will never be accepted; the address stays.
	Drop
	// Pause: the provider refuses everything for now; hold the whole lane
	// for Outcome.After, then retry the message.
	Pause
)

// String names a verdict as the metrics' result label does.
func (v Verdict) String() string {
	switch v {
	case Sent:
		return "sent"
	case Retry:
		return "retry"
	case Retire:
		return "retired"
	case Drop:
		return "dropped"
	case Pause:
		return "paused"
	}
	return "unknown"
}

// Outcome is the provider's answer to one message.
type Outcome struct {
	Verdict Verdict
	// After is how long to wait before a Retry or a Pause ends (the
	// provider's Retry-After when it gave one).
	After time.Duration
	// ProviderID is the provider's name for an accepted message (a
	// Message-ID, a Twilio SID, an APNs id), kept to match later reports.
	ProviderID string
	// Err is the provider's answer for the logs; nil when Sent.
	Err error
}

// Sender sends a batch and answers one Outcome per Message, in order. A
// channel batches as its provider allows (one SMTP session for many
// mails, concurrent HTTP/2 streams on one connection) and says so in its
// package documentation; a canceled ctx answers Retry for what was not
// sent.
type Sender interface {
	Send(ctx context.Context, batch []Message) []Outcome
}

// Spec is what a channel declares about itself; the worker builds the
// channel's lane from it.
type Spec struct {
	// Name is the channel's name: its lane, its metrics' channel label, its
	// delivery marks' kind ("email", "webpush", "fcm", "apns", "sms",
	// "webhook").
	Name string
	// MaxBatch is how many messages one Send takes (1: no batching).
	MaxBatch int
	// MaxBody is the largest Body the provider accepts, in bytes (0: no
	// limit of the channel's own).
	MaxBody int
}

// Channel is one channel as the worker holds it.
type Channel interface {
	Sender
	Spec() Spec
}

// Report is what a provider tells later about an address or a message:
// a bounce, a complaint, a STOP, a delivery failure. A channel's inbound
// handler parses it; the service that owns the address applies it.
type Report struct {
	// Channel is the reporting channel's Spec().Name.
	Channel string
	// To is the address the report is about, in the channel's terms.
	To string
	// Verdict is Retire for a dead address (hard bounce, STOP, Twilio
	// 21614), Drop for a failed message whose address stays.
	Verdict Verdict
	// Kind names the report as the provider did ("bounce", "complaint",
	// "stop", "undelivered").
	Kind string
	// ProviderID matches Outcome.ProviderID when the provider gave one.
	ProviderID string
	At         time.Time
}

// Reports receives what an inbound handler parsed.
type Reports interface {
	Report(ctx context.Context, r Report) error
}

// OneByOne answers batch for a provider that takes one message per
// request: each message goes through send in turn, and a canceled ctx
// answers Retry for what was not sent. Every channel of MaxBatch 1 sends
// so, which keeps the order of the Outcomes and the cancellation rule of
// Sender in one place.
func OneByOne(ctx context.Context, batch []Message, send func(context.Context, Message) Outcome) []Outcome {
	out := make([]Outcome, len(batch))
	for i, m := range batch {
		if err := ctx.Err(); err != nil {
			out[i] = Outcome{Verdict: Retry, Err: err}
			continue
		}
		out[i] = send(ctx, m)
	}
	return out
}

// Concurrently answers batch for a provider that takes many requests at
// once (concurrent HTTP/2 streams of one connection): each message goes
// through send in a goroutine of its own, at most limit at once (limit <=
// 0: all of them), and the Outcomes come back in the batch's order. A
// message whose turn comes after ctx ends is not sent and answers Retry;
// one already sent answers what send made of the canceled ctx. The cap
// on a provider's connection is its client's to keep (fcm.Client,
// apns.Client): limit only bounds the goroutines of one batch.
func Concurrently(ctx context.Context, batch []Message, limit int, send func(context.Context, Message) Outcome) []Outcome {
	out := make([]Outcome, len(batch))
	if limit <= 0 || limit > len(batch) {
		limit = len(batch)
	}
	slots := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, m := range batch {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			out[i] = Outcome{Verdict: Retry, Err: ctx.Err()}
			continue
		}
		if err := ctx.Err(); err != nil {
			<-slots
			out[i] = Outcome{Verdict: Retry, Err: err}
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			out[i] = send(ctx, m)
		})
	}
	wg.Wait()
	return out
}
