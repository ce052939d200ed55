package fcm_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/fcm"
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
	err  error
	sent []fcm.Notification
}

func (f *fakeSender) Send(_ context.Context, _ string, n fcm.Notification) error {
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
	if spec := ch.Spec(); spec.Name != "fcm" || spec.MaxBatch != 1 || spec.MaxBody != fcm.MaxPayload {
		t.Fatalf("spec %+v", spec)
	}
}
