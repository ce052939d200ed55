package worker

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/channels/sms/smstest"
	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// smsEnv is a store, a Twilio-shaped gateway over HTTP and the sms lane's
// handler on them.
type smsEnv struct {
	d   *delivery
	gw  *smstest.Server
	h   *SMSSender
	now time.Time
}

func newSMSEnv(t *testing.T, limits SMSLimits, q *quiet.Hours) *smsEnv {
	t.Helper()
	e := &smsEnv{d: newDelivery(t), gw: smstest.New(t), now: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
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
// number that replied STOP, and not past its end. Only a text the gateway
// took makes the code usable, with that message's SID; a code whose text
// was refused, or is still waiting on a 503, cannot be entered.
func TestSMSCode(t *testing.T) {
	e := newSMSEnv(t, SMSLimits{}, nil)
	ctx := context.Background()
	run := func(id int64, number string, until time.Time) error {
		if err := e.d.store.StartPhoneCode(ctx, id, number, "123456"); err != nil {
			t.Fatal(err)
		}
		task := tasks.NewSMSCode(tasks.SMSCodePayload{SubscriberID: id, Number: number, Code: "123456", Text: "Your code is 123456", Until: until})
		return runTask(ctx, tasks.SMSCode, e.h.HandleSMSCode, task)
	}
	if err := run(7, "+447400123456", e.now.Add(time.Minute)); err != nil || len(e.gw.Messages()) != 1 || e.gw.Messages()[0].Body != "Your code is 123456" {
		t.Fatalf("a code: %v %+v", err, e.gw.Messages())
	}
	if number, sid, err := e.d.store.CheckPhoneCode(ctx, 7, "123456"); err != nil || number != "+447400123456" || sid != e.gw.Messages()[0].SID {
		t.Fatalf("the code once texted: %q %q %v, want the message %s", number, sid, err, e.gw.Messages()[0].SID)
	}
	if err := e.d.store.SetNumberState(ctx, "+447400123457", store.NumberStopped); err != nil {
		t.Fatal(err)
	}
	if err := run(8, "+447400123457", e.now.Add(time.Minute)); err != nil || len(e.gw.Messages()) != 1 {
		t.Fatalf("a code to a number that replied STOP: %v, %d sent", err, len(e.gw.Messages()))
	}
	if err := run(9, "+447400123458", e.now.Add(-time.Second)); err != nil || len(e.gw.Messages()) != 1 {
		t.Fatalf("a code past its end: %v, %d sent", err, len(e.gw.Messages()))
	}
	e.gw.Permanent("+447400123459", 21408)
	if err := run(10, "+447400123459", e.now.Add(time.Minute)); err != nil || len(e.gw.Messages()) != 1 {
		t.Fatalf("a code the gateway refused: %v, %d sent", err, len(e.gw.Messages()))
	}
	e.gw.FailNext(1, http.StatusServiceUnavailable, "")
	if err := run(11, "+447400123460", e.now.Add(time.Minute)); err == nil {
		t.Fatal("a code met with a 503 was not retried")
	}
	for id := int64(8); id <= 11; id++ {
		if _, _, err := e.d.store.CheckPhoneCode(ctx, id, "123456"); !errors.Is(err, store.ErrCodeNotSent) {
			t.Errorf("subscriber %d: the right code of a text not taken: %v, want it unusable", id, err)
		}
	}
}

// TestSMSCapsAreCounted: a text held at the number's daily cap, and one
// held or a code dropped at the service's, are counted by the cap reached
// (newsletter_sms_cap_reached_total), which the alert watches.
func TestSMSCapsAreCounted(t *testing.T) {
	e := newSMSEnv(t, SMSLimits{PerNumberDay: 1, PerDay: 2}, nil)
	capped := func(c string) float64 { return testutil.ToFloat64(e.d.metrics.SMSCapReached.WithLabelValues(c)) }
	a := e.reader(t, "a@x.io", "+447400123456", "")
	b := e.reader(t, "b@x.io", "+447400123457", "")
	c := e.reader(t, "c@x.io", "+447400123458", "")
	if err := e.run(a, "ev:1", "News"); err != nil {
		t.Fatal(err)
	}
	var d *Deferred
	if err := e.run(a, "ev:2", "More"); !errors.As(err, &d) || capped(store.SMSCapPerNumberDay) != 1 || capped(store.SMSCapPerDay) != 0 {
		t.Fatalf("past the number's cap: %v, counted %v/%v", err, capped(store.SMSCapPerNumberDay), capped(store.SMSCapPerDay))
	}
	if err := e.run(b, "ev:1", "News"); err != nil {
		t.Fatal(err)
	}
	if err := e.run(c, "ev:1", "News"); !errors.As(err, &d) || capped(store.SMSCapPerDay) != 1 {
		t.Fatalf("past the day's cap: %v, counted %v", err, capped(store.SMSCapPerDay))
	}
	code := tasks.NewSMSCode(tasks.SMSCodePayload{SubscriberID: c, Number: "+447400123458", Code: "123456", Text: "Your code is 123456", Until: e.now.Add(time.Minute)})
	if err := runTask(context.Background(), tasks.SMSCode, e.h.HandleSMSCode, code); err != nil || capped(store.SMSCapPerDay) != 2 {
		t.Fatalf("a code past the day's cap: %v, counted %v", err, capped(store.SMSCapPerDay))
	}
	if n := len(e.gw.Messages()); n != 2 {
		t.Fatalf("%d texts sent, want 2 (the caps held the rest)", n)
	}
}
