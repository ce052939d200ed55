package fcm_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/fcm/fcmtest"
	"github.com/newsletter/newsletter/internal/testkit/crowd"
)

// unregistered is FCM v1's answer for a token whose app is gone.
const unregistered = `{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND",` +
	`"details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}`

func fcmError(code int, status, errorCode string) string {
	return `{"error":{"code":` + strconv.Itoa(code) + `,"message":"m","status":"` + status + `",` +
		`"details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"` + errorCode + `"}]}}`
}

// Each answer of FCM is the Outcome the lane acts on: only UNREGISTERED
// (and a token that is not one) retires the device; a refusal that
// answers every device alike when a setting is wrong drops the message;
// 429 and 5xx retry it, no sooner than Retry-After.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		want  channels.Verdict
		after time.Duration
	}{
		{"200", nil, channels.Sent, 0},
		{"404 UNREGISTERED", fcm.ParseError(404, unregistered, ""), channels.Retire, 0},
		{"not a token", fcm.ValidToken("x"), channels.Retire, 0},
		{"a bare 404", fcm.ParseError(404, `{"error":{"code":404,"message":"m","status":"NOT_FOUND"}}`, ""), channels.Drop, 0},
		{"400 INVALID_ARGUMENT", fcm.ParseError(400, fcmError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"), ""), channels.Drop, 0},
		{"403 SENDER_ID_MISMATCH", fcm.ParseError(403, fcmError(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH"), ""), channels.Drop, 0},
		{"429 QUOTA_EXCEEDED with Retry-After", fcm.ParseError(429, fcmError(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), "30"), channels.Retry, 30 * time.Second},
		{"503 with Retry-After", fcm.ParseError(503, fcmError(503, "UNAVAILABLE", "UNAVAILABLE"), "5"), channels.Retry, 5 * time.Second},
		{"no answer", errors.New("dial tcp: connection refused"), channels.Retry, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fcm.Classify(tc.err)
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
	sent []fcm.Notification
}

func (f *fakeSender) Send(_ context.Context, _ string, n fcm.Notification) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, n)
	return f.err
}

// The channel sends the body's notification, answers each message's
// Outcome, drops a body that is not a notification, and retries what a
// canceled context left unsent.
func TestChannelSend(t *testing.T) {
	f := &fakeSender{}
	ch := fcm.Channel{Sender: f}
	got := ch.Send(context.Background(), []channels.Message{
		{To: "tok", Body: []byte(`{"title":"T","body":"B","url":"https://example.com/a"}`)},
		{To: "tok", Body: []byte(`not json`)},
	})
	if len(got) != 2 || got[0].Verdict != channels.Sent || got[1].Verdict != channels.Drop {
		t.Fatalf("outcomes %+v, want sent and dropped", got)
	}
	if len(f.sent) != 1 || f.sent[0] != (fcm.Notification{Title: "T", Body: "B", URL: "https://example.com/a"}) {
		t.Fatalf("sent %+v", f.sent)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := ch.Send(ctx, []channels.Message{{To: "tok", Body: []byte(`{}`)}}); got[0].Verdict != channels.Retry || len(f.sent) != 1 {
		t.Fatalf("canceled: %+v, %d sent", got, len(f.sent))
	}
	if spec := ch.Spec(); spec.Name != "fcm" || spec.MaxBatch != fcm.MaxBatch || fcm.MaxBatch != 100 || spec.MaxBody != fcm.MaxPayload {
		t.Fatalf("spec %+v", spec)
	}
}

// setupHTTP2 is a client of FCM over TLS and HTTP/2, as in production
// (NewHTTPClient), with at most streams messages in flight.
func setupHTTP2(t *testing.T, streams int) (*fcmtest.Server, *fcm.Client) {
	t.Helper()
	srv := fcmtest.NewHTTP2(t)
	creds, err := fcm.LoadCredentials(srv.CredentialsFile)
	if err != nil {
		t.Fatal(err)
	}
	return srv, &fcm.Client{Creds: creds, BaseURL: srv.URL, HTTP: fcm.NewHTTPClient(srv.RootCAs()), MaxStreams: streams}
}

// token is the i-th test registration token.
func token(i int) string { return fmt.Sprintf("tok%d:%s", i, strings.Repeat("a", 40)) }

// A batch goes to FCM at once over the client's one HTTP/2 connection
// (the server holds every message until the whole batch is in flight),
// and each message is answered its own Outcome in the batch's order:
// UNREGISTERED retires, a body that is no notification drops, a 429
// retries after its Retry-After, the rest are sent.
func TestChannelSendsABatchOverOneConnection(t *testing.T) {
	srv, c := setupHTTP2(t, 0)
	const n = 20
	batch := make([]channels.Message, n)
	for i := range batch {
		batch[i] = channels.Message{To: token(i), Body: []byte(fmt.Sprintf(`{"title":"t%d"}`, i))}
	}
	srv.Unregistered(batch[3].To)
	srv.Throttle(batch[7].To, 429, "30")
	batch[5].Body = []byte("not json")
	srv.HoldUntil(n - 1) // every message but the one never sent
	out := fcm.Channel{Sender: c}.Send(context.Background(), batch)
	for i, o := range out {
		want, after := channels.Sent, time.Duration(0)
		switch i {
		case 3:
			want = channels.Retire
		case 5:
			want = channels.Drop
		case 7:
			want, after = channels.Retry, 30*time.Second
		}
		if o.Verdict != want || o.After != after {
			t.Fatalf("outcome %d: %+v, want %s after %s", i, o, want, after)
		}
	}
	if got := len(srv.Received()); got != n-3 {
		t.Fatalf("%d messages taken, want %d", got, n-3)
	}
	if most := srv.MaxInFlight(); most != n-1 {
		t.Fatalf("%d messages in flight at most, want the batch's %d", most, n-1)
	}
	if conns := srv.Connections(); conns != 1 {
		t.Fatalf("%d connections for one batch (and its token exchange), want 1", conns)
	}
}

// A client's MaxStreams bounds its messages in flight, every caller's
// together: three batches of four at once, over a client of two streams,
// have two at the server (which holds them) and ten waiting for a
// stream, then all go, on one connection.
func TestMaxStreams(t *testing.T) {
	srv, c := setupHTTP2(t, 2)
	ch := fcm.Channel{Sender: c}
	crowd.MaxStreams(t, srv, c.Waiting, crowd.Streams{Max: 2, Waiting: 10, Noun: "messages"}, 3, func(i int) error {
		batch := make([]channels.Message, 4)
		for j := range batch {
			batch[j] = channels.Message{To: token(4*i + j), Body: []byte(`{"title":"t"}`)}
		}
		return allSent(ch.Send(context.Background(), batch))
	})
	if got := len(srv.Received()); got != 12 {
		t.Errorf("%d messages taken, want 12", got)
	}
}

// allSent is an error for the first outcome that is not Sent.
func allSent(outs []channels.Outcome) error {
	for _, o := range outs {
		if o.Verdict != channels.Sent {
			return fmt.Errorf("outcome %+v, want Sent", o)
		}
	}
	return nil
}

// A send waiting for one of the client's streams gives up when its
// context ends, without a request, and that is worth a retry.
func TestWaitForAStreamFollowsContext(t *testing.T) {
	srv, c := setupHTTP2(t, 1)
	crowd.WaitForAStream(t, crowd.Waiter{Server: srv, Waiting: c.Waiting, Requests: srv.Sends, Noun: "message",
		Send: func(ctx context.Context, i int, title string) error {
			return c.Send(ctx, token(i), fcm.Notification{Title: title})
		},
		Retry: func(err error) error {
			if out := fcm.Classify(err); out.Verdict != channels.Retry || !errors.Is(out.Err, context.Canceled) {
				return fmt.Errorf("%+v", out)
			}
			return nil
		}})
}
