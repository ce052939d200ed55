package channels_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/newsletter/newsletter/internal/testkit/poll"

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

// Concurrently has limit sends in flight at once, never more, and answers
// in the batch's order whatever order the sends end in: every send waits
// until the test sees limit of them in flight, so a sender that sent one
// by one would never get there.
func TestConcurrentlyKeepsItsLimitAndTheOrder(t *testing.T) {
	const limit, n = 3, 10
	var mu sync.Mutex
	inFlight, most := 0, 0
	release := make(chan struct{})
	batch := make([]channels.Message, n)
	for i := range batch {
		batch[i].To = fmt.Sprint(i)
	}
	done := make(chan []channels.Outcome, 1)
	go func() {
		done <- channels.Concurrently(context.Background(), batch, limit, func(_ context.Context, m channels.Message) channels.Outcome {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			<-release
			mu.Lock()
			inFlight--
			mu.Unlock()
			return channels.Outcome{Verdict: channels.Sent, ProviderID: "id-" + m.To}
		})
	}()
	poll.True(t, poll.BusyMachine, fmt.Sprintf("%d sends in flight at once", limit), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inFlight == limit
	})
	close(release)
	out := <-done
	if most != limit {
		t.Fatalf("%d sends in flight at most, want the limit of %d", most, limit)
	}
	if len(out) != n {
		t.Fatalf("%d outcomes for %d messages", len(out), n)
	}
	for i, o := range out {
		if o.Verdict != channels.Sent || o.ProviderID != fmt.Sprint("id-", i) {
			t.Fatalf("outcome %d: %+v, want Sent as id-%d", i, o, i)
		}
	}
}

// Once ctx is canceled, Concurrently starts no more sends: what was not
// sent answers Retry with the context's error, what was answers its own
// Outcome.
func TestConcurrentlyStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var sent []string
	out := channels.Concurrently(ctx, []channels.Message{{To: "a"}, {To: "b"}, {To: "c"}}, 1, func(_ context.Context, m channels.Message) channels.Outcome {
		mu.Lock()
		sent = append(sent, m.To)
		mu.Unlock()
		cancel()
		return channels.Outcome{Verdict: channels.Drop, Err: errors.New("refused")}
	})
	if len(sent) != 1 || sent[0] != "a" {
		t.Fatalf("sent %q, want a alone", sent)
	}
	if out[0].Verdict != channels.Drop {
		t.Fatalf("the sent message: %+v, want its own Drop", out[0])
	}
	for _, o := range out[1:] {
		if o.Verdict != channels.Retry || !errors.Is(o.Err, context.Canceled) {
			t.Fatalf("a message after the cancel: %+v, want Retry with context.Canceled", o)
		}
	}
}
