package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/webhook"
)

// Each answer of an endpoint is the Outcome the lane acts on: 2xx is
// sent, a secret that cannot sign drops the event, 410 Gone retires the
// endpoint, any other answer or none retries, no sooner than Retry-After.
func TestChannelOutcomes(t *testing.T) {
	good := webhook.NewSecret()
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		secret string
		closed bool // the endpoint is down: no answer at all
		want   channels.Verdict
		after  time.Duration
	}{
		{"204", func(w http.ResponseWriter) { w.WriteHeader(204) }, good, false, channels.Sent, 0},
		{"a secret that cannot sign", func(w http.ResponseWriter) {}, "not-a-secret", false, channels.Drop, 0},
		{"410 Gone", func(w http.ResponseWriter) { w.WriteHeader(410) }, good, false, channels.Retire, 0},
		{"503 with Retry-After", func(w http.ResponseWriter) { w.Header().Set("Retry-After", "7"); w.WriteHeader(503) }, good, false, channels.Retry, 7 * time.Second},
		{"no answer", func(http.ResponseWriter) {}, good, true, channels.Retry, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &receiver{answer: func(_ int, w http.ResponseWriter) { tc.answer(w) }}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			if tc.closed {
				srv.Close()
			}
			ch := webhook.Channel{Poster: webhook.NewSender(loopback)}
			got := ch.Send(context.Background(), []channels.Message{{To: srv.URL, Body: []byte("{}"),
				Attrs: map[string]string{webhook.AttrID: "msg_1", webhook.AttrSecret: tc.secret}}})
			if len(got) != 1 || got[0].Verdict != tc.want || got[0].After != tc.after {
				t.Fatalf("outcomes %+v, want %s after %s", got, tc.want, tc.after)
			}
			if sent := got[0].Verdict == channels.Sent; sent != (got[0].Err == nil) {
				t.Fatalf("outcome %+v: an error unless sent", got[0])
			}
		})
	}
}

// A canceled context retries what was not posted, and posts nothing.
func TestChannelCancel(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := webhook.Channel{Poster: webhook.NewSender(loopback)}.Send(ctx, []channels.Message{{To: srv.URL}, {To: srv.URL}})
	if len(got) != 2 || got[0].Verdict != channels.Retry || got[1].Verdict != channels.Retry || len(rc.requests()) != 0 {
		t.Fatalf("canceled: %+v, %d requests", got, len(rc.requests()))
	}
	if spec := (webhook.Channel{}).Spec(); spec.Name != "webhook" || spec.MaxBatch != 1 {
		t.Fatalf("spec %+v", spec)
	}
}
