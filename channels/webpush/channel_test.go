package webpush_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/webpush"
)

// Each answer of a push service is the Outcome the lane acts on: 404 and
// 410 retire the subscription, other refusals drop the message, 429 and
// 5xx retry it no sooner than Retry-After, no answer retries it on the
// lane's backoff.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		want  channels.Verdict
		after time.Duration
	}{
		{"201", nil, channels.Sent, 0},
		{"404", &webpush.StatusError{Status: 404}, channels.Retire, 0},
		{"410", &webpush.StatusError{Status: 410}, channels.Retire, 0},
		{"403 VAPID refused", &webpush.StatusError{Status: 403}, channels.Drop, 0},
		{"413 too large", &webpush.StatusError{Status: 413}, channels.Drop, 0},
		{"a bad subscription", fmt.Errorf("%w: endpoint is not an https URL", webpush.ErrBadSubscription), channels.Drop, 0},
		{"429 with Retry-After", &webpush.StatusError{Status: 429, RetryAfter: 9 * time.Second}, channels.Retry, 9 * time.Second},
		{"503", &webpush.StatusError{Status: 503}, channels.Retry, 0},
		{"no answer", errors.New("i/o timeout"), channels.Retry, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := webpush.Classify(tc.err)
			if got.Verdict != tc.want || got.After != tc.after || (got.Err == nil) != (tc.err == nil) {
				t.Fatalf("%v: outcome %+v, want %s after %s", tc.err, got, tc.want, tc.after)
			}
		})
	}
}

// fakeSender answers err for every send and keeps what it was given.
type fakeSender struct {
	err  error
	subs []webpush.Subscription
}

func (f *fakeSender) Send(_ context.Context, s webpush.Subscription, _ []byte, _ webpush.Options) error {
	f.subs = append(f.subs, s)
	return f.err
}

// The channel sends to the subscription the message's To and keys name,
// drops a message whose keys do not decode, and retries what a canceled
// context left unsent.
func TestChannelSend(t *testing.T) {
	key, auth := make([]byte, webpush.PublicKeyLen), make([]byte, webpush.AuthSecretLen)
	enc := base64.RawURLEncoding.EncodeToString
	f := &fakeSender{err: &webpush.StatusError{Status: 410}}
	ch := webpush.Channel{Sender: f}
	got := ch.Send(context.Background(), []channels.Message{
		{To: "https://push.example/1", Body: []byte(`{"title":"T"}`), Attrs: map[string]string{webpush.AttrP256DH: enc(key), webpush.AttrAuth: enc(auth)}},
		{To: "https://push.example/2", Body: []byte(`{"title":"T"}`), Attrs: map[string]string{webpush.AttrP256DH: "!!", webpush.AttrAuth: enc(auth)}},
	})
	if len(got) != 2 || got[0].Verdict != channels.Retire || got[1].Verdict != channels.Drop {
		t.Fatalf("outcomes %+v, want retired and dropped", got)
	}
	if len(f.subs) != 1 || f.subs[0].Endpoint != "https://push.example/1" || len(f.subs[0].P256DH) != webpush.PublicKeyLen || len(f.subs[0].Auth) != webpush.AuthSecretLen {
		t.Fatalf("sent to %+v", f.subs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := ch.Send(ctx, []channels.Message{{To: "https://push.example/1"}}); got[0].Verdict != channels.Retry || len(f.subs) != 1 {
		t.Fatalf("canceled: %+v, %d sent", got, len(f.subs))
	}
	if spec := ch.Spec(); spec.Name != "webpush" || spec.MaxBatch != 1 || spec.MaxBody != webpush.MaxPayload {
		t.Fatalf("spec %+v", spec)
	}
}
