package api

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/channels/sms/smstest"
	"github.com/newsletter/newsletter/store"
)

// The gateway's callbacks, signed as Twilio signs over the public URL
// (the service behind a proxy): STOP stops the number at once for whoever
// gave it, START turns it on, a delivery status of a landline retires it;
// an unsigned or wrongly signed callback, or one signed over another URL,
// is 403 and changes nothing.
func TestSMSFeedback(t *testing.T) {
	gw := smstest.New(t)
	const public = "https://news.example.com"
	e := newHooksEnv(t, Config{Origin: public, SMSAuthToken: gw.AuthToken})
	ctx := context.Background()
	sub, err := e.store.Subscribe(ctx, store.SubscribeRequest{Email: "sms@x.io", Activate: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.SetPhone(ctx, sub.ID, "+447400123456", "app"); err != nil {
		t.Fatal(err)
	}
	send := func(req *http.Request) (int, string) {
		t.Helper()
		// Signed for the public URL, delivered to the listener.
		u, _ := url.Parse(e.srv.URL + req.URL.RequestURI())
		req.URL, req.Host, req.RequestURI = u, u.Host, ""
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	state := func() string {
		t.Helper()
		p, err := e.store.PhonesOf(ctx, []int64{sub.ID})
		if err != nil {
			t.Fatal(err)
		}
		return p[0].State
	}
	inbound := func(body string) url.Values {
		return url.Values{"From": {"+447400123456"}, "To": {"+15005550006"}, "Body": {body}, "MessageSid": {"SM1"}}
	}

	forged := gw.SignedInbound(public+"/feedback/sms", inbound("STOP"))
	forged.Header.Set("X-Twilio-Signature", "AAAA")
	if status, _ := send(forged); status != 403 || state() != store.NumberOn {
		t.Fatalf("a forged STOP: %d, state %s", status, state())
	}
	elsewhere := gw.SignedInbound("https://evil.example/feedback/sms", inbound("STOP"))
	elsewhere.URL.Host = "news.example.com"
	if status, _ := send(elsewhere); status != 403 || state() != store.NumberOn {
		t.Fatalf("a STOP signed for another URL: %d, state %s", status, state())
	}
	if status, body := send(gw.SignedInbound(public+"/feedback/sms", inbound(" stop "))); status != 200 || !strings.Contains(body, "<Response>") || state() != store.NumberStopped {
		t.Fatalf("STOP: %d %s, state %s", status, body, state())
	}
	if status, _ := send(gw.SignedInbound(public+"/feedback/sms", inbound("thanks!"))); status != 200 || state() != store.NumberStopped {
		t.Fatalf("another message changed the state: %d %s", status, state())
	}
	if status, _ := send(gw.SignedInbound(public+"/feedback/sms", inbound("START"))); status != 200 || state() != store.NumberOn {
		t.Fatalf("START: %d, state %s", status, state())
	}
	landline := url.Values{"MessageSid": {"SM2"}, "MessageStatus": {"undelivered"}, "ErrorCode": {"30006"}, "To": {"+447400123456"}}
	if status, _ := send(gw.SignedInbound(public+"/feedback/sms?attempt=1", landline)); status != 200 || state() != store.NumberRetired {
		t.Fatalf("a landline status: %d, state %s", status, state())
	}
}
