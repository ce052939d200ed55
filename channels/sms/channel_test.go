package sms_test

import (
	"context"
	"testing"
	"time"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/channels/sms/smstest"
)

// Each answer of the gateway is the Outcome the lane acts on: the
// number's own refusals retire it, the gateway's refuse the text, 429 and
// 5xx retry it no sooner than Retry-After, a gateway that does not answer
// in time retries it on the lane's backoff.
func TestChannelOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		arrange func(f *smstest.Server, to string)
		want    channels.Verdict
		after   time.Duration
	}{
		{"taken", func(*smstest.Server, string) {}, channels.Sent, 0},
		{"21614 not a mobile", func(f *smstest.Server, to string) { f.Permanent(to, 21614) }, channels.Retire, 0},
		{"21211 invalid", func(f *smstest.Server, to string) { f.Permanent(to, 21211) }, channels.Retire, 0},
		{"21610 STOP", func(f *smstest.Server, to string) { f.Permanent(to, 21610) }, channels.Retire, 0},
		{"21408 region not enabled", func(f *smstest.Server, to string) { f.Permanent(to, 21408) }, channels.Drop, 0},
		{"429 with Retry-After", func(f *smstest.Server, _ string) { f.FailNext(1, 429, "7") }, channels.Retry, 7 * time.Second},
		{"503 without Retry-After", func(f *smstest.Server, _ string) { f.FailNext(1, 503, "") }, channels.Retry, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := smstest.New(t)
			const to = "+447700900123"
			tc.arrange(f, to)
			ch := sms.Channel{Gateway: clientFor(f)}
			got := ch.Send(context.Background(), []channels.Message{{To: to, Body: []byte("Hello")}})
			if len(got) != 1 || got[0].Verdict != tc.want || got[0].After != tc.after {
				t.Fatalf("outcomes %+v, want %s after %s", got, tc.want, tc.after)
			}
			if sent := got[0].Verdict == channels.Sent; sent != (got[0].Err == nil) || sent != (got[0].ProviderID != "") {
				t.Fatalf("outcome %+v: an error and no SID unless sent", got[0])
			}
		})
	}
}

// Bad credentials drop the text (the lane does not hold texts for the
// operator's fix); a canceled context retries what was not sent.
func TestChannelCredentialsAndCancel(t *testing.T) {
	f := smstest.New(t)
	c := clientFor(f)
	c.AuthToken = "wrong"
	got := sms.Channel{Gateway: c}.Send(context.Background(), []channels.Message{{To: "+447700900123", Body: []byte("Hi")}})
	if got[0].Verdict != channels.Drop {
		t.Fatalf("bad credentials: %+v, want dropped", got[0])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got = sms.Channel{Gateway: clientFor(f)}.Send(ctx, []channels.Message{{To: "+447700900123"}, {To: "+447700900124"}})
	if len(got) != 2 || got[0].Verdict != channels.Retry || got[1].Verdict != channels.Retry || f.Attempts() != 1 {
		t.Fatalf("canceled: %+v, %d attempts (the bad-credential one only)", got, f.Attempts())
	}
	if spec := (sms.Channel{}).Spec(); spec.Name != "sms" || spec.MaxBatch != 1 {
		t.Fatalf("spec %+v", spec)
	}
}
