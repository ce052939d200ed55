package channels_test

import (
	"context"
	"errors"
	"testing"

	"github.com/newsletter/newsletter/channels"
)

// OneByOne sends each message in order and answers in that order; once
// ctx is canceled (here by the second send), what was not sent is Retry
// with the context's error, and send is not called for it.
func TestOneByOne(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sent []string
	out := channels.OneByOne(ctx, []channels.Message{{To: "a"}, {To: "b"}, {To: "c"}}, func(_ context.Context, m channels.Message) channels.Outcome {
		sent = append(sent, m.To)
		if m.To == "b" {
			cancel()
			return channels.Outcome{Verdict: channels.Drop, Err: errors.New("refused")}
		}
		return channels.Outcome{Verdict: channels.Sent, ProviderID: "id-" + m.To}
	})
	if len(sent) != 2 || sent[0] != "a" || sent[1] != "b" {
		t.Fatalf("sent %q, want a then b", sent)
	}
	if len(out) != 3 || out[0].Verdict != channels.Sent || out[0].ProviderID != "id-a" || out[1].Verdict != channels.Drop {
		t.Fatalf("outcomes %+v", out)
	}
	if out[2].Verdict != channels.Retry || !errors.Is(out[2].Err, context.Canceled) {
		t.Fatalf("the message after the cancel: %+v, want Retry with context.Canceled", out[2])
	}
}
