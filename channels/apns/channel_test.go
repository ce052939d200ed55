package apns_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/apns/apnstest"
)

// Each answer of APNs is the Outcome the lane acts on: 410 (and a token
// that is not one) retires the device; BadDeviceToken and other refusals
// drop the notification and keep the device (Apple answers them for
// every device when a setting is wrong); 429 and 5xx retry it, no sooner
// than Retry-After.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		want  channels.Verdict
		after time.Duration
	}{
		{"200", nil, channels.Sent, 0},
		{"410 Unregistered", apns.ParseError(410, `{"reason":"Unregistered","timestamp":1700000000000}`, ""), channels.Retire, 0},
		{"not a token", apns.ValidToken("xyz"), channels.Retire, 0},
		{"400 BadDeviceToken", apns.ParseError(400, `{"reason":"BadDeviceToken"}`, ""), channels.Drop, 0},
		{"413 PayloadTooLarge", apns.ParseError(413, `{"reason":"PayloadTooLarge"}`, ""), channels.Drop, 0},
		{"429 TooManyRequests with Retry-After", apns.ParseError(429, `{"reason":"TooManyRequests"}`, "20"), channels.Retry, 20 * time.Second},
		{"503 ServiceUnavailable", apns.ParseError(503, `{"reason":"ServiceUnavailable"}`, ""), channels.Retry, 0},
		{"no answer", errors.New("read: connection reset by peer"), channels.Retry, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := apns.Classify(tc.err)
			if got.Verdict != tc.want || got.After != tc.after || (got.Err == nil) != (tc.err == nil) {
				t.Fatalf("%v: outcome %+v, want %s after %s", tc.err, got, tc.want, tc.after)
			}
		})
	}
}

// fakeSender answers err for every send and keeps what it was given.
type fakeSender struct {
	mu   sync.Mutex
	err  error
	sent []apns.Notification
}

func (f *fakeSender) Send(_ context.Context, _ string, n apns.Notification) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, n)
	return f.err
}

// The channel sends the body's notification, answers each message's
// Outcome, drops a body that is not a notification, and retries what a
// canceled context left unsent.
func TestChannelSend(t *testing.T) {
	f := &fakeSender{err: apns.ParseError(410, `{"reason":"Unregistered"}`, "")}
	ch := apns.Channel{Sender: f}
	got := ch.Send(context.Background(), []channels.Message{
		{To: "tok", Body: []byte(`{"title":"T","body":"B","url":"https://example.com/a"}`)},
		{To: "tok", Body: []byte(`[1]`)},
	})
	if len(got) != 2 || got[0].Verdict != channels.Retire || got[1].Verdict != channels.Drop {
		t.Fatalf("outcomes %+v, want retired and dropped", got)
	}
	if len(f.sent) != 1 || f.sent[0] != (apns.Notification{Title: "T", Body: "B", URL: "https://example.com/a"}) {
		t.Fatalf("sent %+v", f.sent)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := ch.Send(ctx, []channels.Message{{To: "tok", Body: []byte(`{}`)}}); got[0].Verdict != channels.Retry || len(f.sent) != 1 {
		t.Fatalf("canceled: %+v, %d sent", got, len(f.sent))
	}
	if spec := ch.Spec(); spec.Name != "apns" || spec.MaxBatch != apns.MaxBatch || apns.MaxBatch != 100 || spec.MaxBody != 4096 {
		t.Fatalf("spec %+v", spec)
	}
}

// A batch goes to APNs over the client's one connection, and each
// message is answered its own Outcome in the batch's order: a device
// APNs calls unregistered retires, a body that is no notification drops,
// the rest are sent.
func TestChannelSendsABatchOverOneConnection(t *testing.T) {
	srv := apnstest.New(t)
	key, err := apns.LoadKey(srv.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	c := &apns.Client{Key: key, KeyID: apnstest.KeyID, TeamID: apnstest.TeamID, Topic: apnstest.Topic,
		BaseURL: srv.URL, HTTP: apns.NewHTTPClient(srv.RootCAs())}
	const n = 20
	batch := make([]channels.Message, n)
	for i := range batch {
		batch[i] = channels.Message{To: fmt.Sprintf("%064x", i+1), Body: []byte(fmt.Sprintf(`{"title":"t%d"}`, i))}
	}
	srv.Unregistered(batch[3].To)
	batch[5].Body = []byte("not json")
	out := apns.Channel{Sender: c}.Send(context.Background(), batch)
	for i, o := range out {
		want := channels.Sent
		switch i {
		case 3:
			want = channels.Retire
		case 5:
			want = channels.Drop
		}
		if o.Verdict != want {
			t.Fatalf("outcome %d: %+v, want %s", i, o, want)
		}
	}
	got := srv.Received()
	if len(got) != n-2 {
		t.Fatalf("%d notifications taken, want %d", len(got), n-2)
	}
	for _, m := range got {
		if m.DeviceToken == batch[3].To || m.DeviceToken == batch[5].To || !strings.HasPrefix(m.Title, "t") {
			t.Fatalf("took %+v", m)
		}
	}
	if conns := srv.Connections(); conns != 1 {
		t.Fatalf("%d connections for one batch, want 1", conns)
	}
}
