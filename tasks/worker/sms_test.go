package worker

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/testkit/twiliotest"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/sms"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// smsEnv is a store, a Twilio-shaped gateway over HTTP and the sms lane's
// handler on them.
type smsEnv struct {
	d   *delivery
	gw  *twiliotest.Server
	h   *SMSSender
	now time.Time
}

func newSMSEnv(t *testing.T, limits SMSLimits, q *quiet.Hours) *smsEnv {
	t.Helper()
	e := &smsEnv{d: newDelivery(t), gw: twiliotest.New(t), now: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	client := &sms.Client{BaseURL: e.gw.URL, AccountSID: e.gw.AccountSID, AuthToken: e.gw.AuthToken, From: "+15005550006"}
	e.h = NewHandlers(Deps{Store: e.d.store, SMS: client, SMSLimits: limits, Quiet: q,
		SMSRetry: RetryPolicy{Base: time.Millisecond, Max: time.Second}, Metrics: e.d.metrics, Log: discard,
		Now: func() time.Time { return e.now }}).SMS
	return e
}

// reader is an active reader of updates with number, and its id.
func (e *smsEnv) reader(t *testing.T, email, number, tz string) int64 {
	t.Helper()
	ctx := context.Background()
	sub, err := e.d.store.Subscribe(ctx, store.SubscribeRequest{Email: email, Activate: true, Timezone: tz, Topics: []string{topics.Updates}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.store.SetPhone(ctx, sub.ID, number, "test"); err != nil {
		t.Fatal(err)
	}
	return sub.ID
}

func (e *smsEnv) run(id int64, key, text string) error {
	task := tasks.NewSMS(tasks.SMSPayload{Key: key, SubscriberID: id, Topics: []string{topics.Updates}, Text: text})
	return runTask(context.Background(), tasks.SMS, e.h.HandleSMS, task)
}

// TestSMSOncePerPersonAndEvent: a text reaches the reader's number over
// the gateway's API once, however often its task runs; a number that
// said STOP, a reader who left, and a text over the segment cap get
// nothing (the last a dead letter).
func TestSMSOncePerPersonAndEvent(t *testing.T) {
	e := newSMSEnv(t, SMSLimits{}, nil)
	ctx := context.Background()
	a := e.reader(t, "a@x.io", "+447400123456", "")
	stopped := e.reader(t, "b@x.io", "+447400123457", "")
	left := e.reader(t, "c@x.io", "+447400123458", "")
	if err := e.d.store.SetNumberState(ctx, "+447400123457", store.NumberStopped); err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.store.Unsubscribe(ctx, "c@x.io"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for _, id := range []int64{a, stopped, left} {
			if err := e.run(id, "ev:1", "Your order shipped"); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := e.gw.Messages()
	if len(got) != 1 || got[0].To != "+447400123456" || got[0].Body != "Your order shipped" || got[0].From != "+15005550006" {
		t.Fatalf("the gateway took %+v, want one text to the first reader", got)
	}
	err := e.run(a, "ev:2", strings.Repeat("long text ", 40))
	if !errors.Is(err, asynq.SkipRetry) || len(e.gw.Messages()) != 1 {
		t.Fatalf("a text over two segments: %v, %d sent", err, len(e.gw.Messages()))
	}
}

// TestSMSGatewayFaults: a 503 with Retry-After retries the text no
// sooner than asked (a counted failure) and the retry sends it once; a
// number the gateway calls invalid is retired and texted no more.
func TestSMSGatewayFaults(t *testing.T) {
	e := newSMSEnv(t, SMSLimits{}, nil)
	a := e.reader(t, "a@x.io", "+447400123456", "")
	e.gw.FailNext(1, http.StatusServiceUnavailable, "90")
	err := e.run(a, "ev:1", "Hello")
	if err == nil || !IsFailure(err) {
		t.Fatalf("503: %v, want a counted failure", err)
	}
	if wait := e.h.RetryDelay(0, err, nil); wait < 90*time.Second {
		t.Fatalf("retry in %s, want at least the gateway's 90s", wait)
	}
	if err := e.run(a, "ev:1", "Hello"); err != nil || len(e.gw.Messages()) != 1 {
		t.Fatalf("the retry: %v, %d sent", err, len(e.gw.Messages()))
	}
	bad := e.reader(t, "bad@x.io", "+447400123459", "")
	e.gw.Permanent("+447400123459", 21211)
	if err := e.run(bad, "ev:1", "Hello"); err != nil {
		t.Fatalf("an invalid number: %v, want the text dropped", err)
	}
	p, _ := e.d.store.PhonesOf(context.Background(), []int64{bad})
	if p[0].State != store.NumberRetired {
		t.Fatalf("the invalid number is %s, want retired", p[0].State)
	}
	attempts := e.gw.Attempts()
	if err := e.run(bad, "ev:2", "Hello again"); err != nil || e.gw.Attempts() != attempts {
		t.Fatalf("a retired number was tried again: %v", err)
	}
}

// TestSMSWaitsForQuietHoursAndTheDailyCap: inside the reader's quiet
// hours a text waits until they end, and past the number's daily cap
// until the next day, neither counted as a failure; then it goes.
func TestSMSWaitsForQuietHoursAndTheDailyCap(t *testing.T) {
	window, err := quiet.Parse("22:00-08:00")
	if err != nil {
		t.Fatal(err)
	}
	e := newSMSEnv(t, SMSLimits{PerNumberDay: 1}, quiet.New(&window))
	a := e.reader(t, "a@x.io", "+447400123456", "Europe/London")
	e.now = time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC) // 23:00 in London
	err = e.run(a, "ev:1", "Late news")
	var d *Deferred
	if !errors.As(err, &d) || IsFailure(err) || d.RetryAfter() != 9*time.Hour || len(e.gw.Messages()) != 0 {
		t.Fatalf("inside quiet hours: %v, %d sent; want a wait of 9h", err, len(e.gw.Messages()))
	}
	e.now = time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC)
	if err := e.run(a, "ev:1", "Late news"); err != nil || len(e.gw.Messages()) != 1 {
		t.Fatalf("after quiet hours: %v, %d sent", err, len(e.gw.Messages()))
	}
	err = e.run(a, "ev:2", "More news")
	if !errors.As(err, &d) || IsFailure(err) || d.RetryAfter() != 15*time.Hour || len(e.gw.Messages()) != 1 {
		t.Fatalf("past the number's cap: %v, %d sent; want a wait until midnight", err, len(e.gw.Messages()))
	}
	e.now = time.Date(2026, 12, 9, 9, 0, 0, 0, time.UTC)
	if err := e.run(a, "ev:2", "More news"); err != nil || len(e.gw.Messages()) != 2 {
		t.Fatalf("the next day: %v, %d sent", err, len(e.gw.Messages()))
	}
}

// TestSMSCode: a number's proof code is texted while it lasts, not to a
// number that replied STOP, and not past its end.
func TestSMSCode(t *testing.T) {
	e := newSMSEnv(t, SMSLimits{}, nil)
	ctx := context.Background()
	run := func(number string, until time.Time) error {
		task := tasks.NewSMSCode(tasks.SMSCodePayload{SubscriberID: 7, Number: number, Text: "Your code is 123456", Until: until})
		return runTask(ctx, tasks.SMSCode, e.h.HandleSMSCode, task)
	}
	if err := run("+447400123456", e.now.Add(time.Minute)); err != nil || len(e.gw.Messages()) != 1 || e.gw.Messages()[0].Body != "Your code is 123456" {
		t.Fatalf("a code: %v %+v", err, e.gw.Messages())
	}
	if err := e.d.store.SetNumberState(ctx, "+447400123457", store.NumberStopped); err != nil {
		t.Fatal(err)
	}
	if err := run("+447400123457", e.now.Add(time.Minute)); err != nil || len(e.gw.Messages()) != 1 {
		t.Fatalf("a code to a number that replied STOP: %v, %d sent", err, len(e.gw.Messages()))
	}
	if err := run("+447400123458", e.now.Add(-time.Second)); err != nil || len(e.gw.Messages()) != 1 {
		t.Fatalf("a code past its end: %v, %d sent", err, len(e.gw.Messages()))
	}
}
