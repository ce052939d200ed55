package worker

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/channels/webpush/webpushtest"
	"github.com/newsletter/newsletter/internal/netguard"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// appPlatform stands in for an app platform's client (push/fcm, push/apns
// have fakes of their own that speak the protocols): it records what it
// accepted and answers what a test tells it to, per token.
type appPlatform struct {
	mu     sync.Mutex
	got    []string // tokens, in the order accepted
	answer map[string]error
	hold   chan struct{} // non-nil: sends block until it is closed
}

func (a *appPlatform) SendApp(ctx context.Context, token string, n webpush.Notification) error {
	a.mu.Lock()
	hold := a.hold
	err := a.answer[token]
	a.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	if n.Title == "" {
		return errors.New("no title")
	}
	a.mu.Lock()
	a.got = append(a.got, token)
	a.mu.Unlock()
	return nil
}

func (a *appPlatform) accepted() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.got...)
}

func (a *appPlatform) set(token string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.answer == nil {
		a.answer = map[string]error{}
	}
	a.answer[token] = err
}

// TestPushReachesAppsBesideBrowsers: one push:deliver reaches a person's
// browser and their app installs on both platforms; an APNs 503 retries
// the task after its Retry-After for that install alone (nobody gets it
// twice), and a dead FCM token deletes the device.
func TestPushReachesAppsBesideBrowsers(t *testing.T) {
	d := newDelivery(t)
	svc, client := newPushService(t)
	ctx := context.Background()
	email := seed(t, d.store, "a", 1)[0]
	sub, _ := addBrowser(t, d.store, svc, email)
	fcmTok, deadTok, apnsTok := strings.Repeat("f", 40), strings.Repeat("d", 40), strings.Repeat("ab", 32)
	for _, dev := range []store.Device{{Platform: store.PlatformFCM, Token: fcmTok}, {Platform: store.PlatformFCM, Token: deadTok}, {Platform: store.PlatformAPNs, Token: apnsTok}} {
		if _, err := d.store.AddDevice(ctx, sub.ID, dev); err != nil {
			t.Fatal(err)
		}
	}
	fcm, apns := &appPlatform{}, &appPlatform{}
	fcm.set(deadTok, &webpush.StatusError{Status: http.StatusNotFound})
	apns.set(apnsTok, &webpush.StatusError{Status: http.StatusServiceUnavailable, RetryAfter: 2 * time.Minute})
	apps := map[string]*AppGate{store.PlatformFCM: NewAppGate(fcm, 0, 0), store.PlatformAPNs: NewAppGate(apns, 0, 0)}
	h := NewHandlers(Deps{Store: d.store, Push: client, Apps: apps, PushRetry: RetryPolicy{Base: time.Millisecond, Max: time.Second},
		Metrics: d.metrics, Log: discard}).Push
	task := tasks.NewPush(tasks.PushPayload{Key: "ev:apps", SubscriberID: sub.ID, Topics: []string{topics.Updates}, Title: "Hello"})

	err := runTask(ctx, tasks.Push, h.HandlePush, task)
	if err == nil || !IsFailure(err) {
		t.Fatalf("APNs 503: %v, want a counted failure", err)
	}
	if wait := h.RetryDelay(0, err, task); wait < 2*time.Minute {
		t.Fatalf("retry in %s, want APNs's Retry-After of 2m", wait)
	}
	if len(svc.Received()) != 1 || len(fcm.accepted()) != 1 || fcm.accepted()[0] != fcmTok || len(apns.accepted()) != 0 {
		t.Fatalf("first run: %d browser, fcm %v, apns %v", len(svc.Received()), fcm.accepted(), apns.accepted())
	}
	left, _ := d.store.DevicesOf(ctx, []int64{sub.ID})
	for _, dev := range left[0] {
		if dev.Token == deadTok {
			t.Fatal("the dead FCM token's device was kept")
		}
	}
	if len(left[0]) != 2 {
		t.Fatalf("%d devices left, want 2", len(left[0]))
	}

	apns.set(apnsTok, nil)
	for range 2 { // the retry, and a second run as after a lost answer
		if err := runTask(ctx, tasks.Push, h.HandlePush, task); err != nil {
			t.Fatal(err)
		}
	}
	if len(svc.Received()) != 1 || len(fcm.accepted()) != 1 || len(apns.accepted()) != 1 {
		t.Fatalf("after the retries: %d browser, fcm %v, apns %v: someone got it twice or not at all", len(svc.Received()), fcm.accepted(), apns.accepted())
	}
}

// TestAppGateLetsNoPlatformHoldTheLane: a platform whose every slot is
// held by a slow send answers the next notification "busy" after the
// gate's short wait (its task retries later) instead of holding one more
// of the lane's workers; the browser of that person is notified all the
// same.
func TestAppGateLetsNoPlatformHoldTheLane(t *testing.T) {
	d := newDelivery(t)
	svc, client := newPushService(t)
	ctx := context.Background()
	emails := seed(t, d.store, "g", 2)
	slow := &appPlatform{hold: make(chan struct{})}
	gate := NewAppGate(slow, 1, 20*time.Millisecond)
	h := NewHandlers(Deps{Store: d.store, Push: client, Apps: map[string]*AppGate{store.PlatformFCM: gate},
		PushRetry: RetryPolicy{Base: time.Millisecond, Max: time.Second}, Metrics: d.metrics, Log: discard}).Push
	var subs []store.Subscriber
	for i, e := range emails {
		s, _ := addBrowser(t, d.store, svc, e)
		if _, err := d.store.AddDevice(ctx, s.ID, store.Device{Platform: store.PlatformFCM, Token: strings.Repeat(string(rune('a'+i)), 40)}); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	first := make(chan error, 1)
	go func() {
		first <- runTask(ctx, tasks.Push, h.HandlePush, tasks.NewPush(tasks.PushPayload{Key: "ev:g", SubscriberID: subs[0].ID, Topics: []string{topics.Updates}, Title: "One"}))
	}()
	// Wait until the first send holds the platform's one slot.
	poll.True(t, poll.BusyMachine, "the first send takes the slot", func() bool { return len(gate.slots) == 1 })
	task := tasks.NewPush(tasks.PushPayload{Key: "ev:g", SubscriberID: subs[1].ID, Topics: []string{topics.Updates}, Title: "Two"})
	err := runTask(ctx, tasks.Push, h.HandlePush, task)
	if err == nil || IsFailure(err) || !strings.Contains(err.Error(), "slots") {
		t.Fatalf("a send with the platform's slots taken: %v, want a wait that is no failure", err)
	}
	if got := svc.Received(); len(got) != 2 {
		t.Fatalf("%d browsers notified, want both: a slow platform held a browser back", len(got))
	}
	close(slow.hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := runTask(ctx, tasks.Push, h.HandlePush, task); err != nil || len(slow.accepted()) != 2 || len(svc.Received()) != 2 {
		t.Fatalf("the retry: %v, apps %v, browsers %d", err, slow.accepted(), len(svc.Received()))
	}
}

// oneASecond is a platform's rate of one notification, then none.
type oneASecond struct{ used bool }

func (r *oneASecond) TakeN(context.Context, int) (int, time.Duration, error) {
	if r.used {
		return 0, 700 * time.Millisecond, nil
	}
	r.used = true
	return 1, 0, nil
}

// TestAppRateDefersWithoutFailing: past its platform's own rate an app
// notification waits for room (the rate's wait, not a failure), its
// browser notified all the same, and goes once there is room.
func TestAppRateDefersWithoutFailing(t *testing.T) {
	d := newDelivery(t)
	svc, client := newPushService(t)
	ctx := context.Background()
	emails := seed(t, d.store, "r", 2)
	fcm := &appPlatform{}
	gate := NewAppGate(fcm, 0, 0)
	rate := &oneASecond{}
	gate.Rate = rate
	h := NewHandlers(Deps{Store: d.store, Push: client, Apps: map[string]*AppGate{store.PlatformFCM: gate},
		PushRetry: RetryPolicy{Base: time.Millisecond, Max: time.Second}, Metrics: d.metrics, Log: discard}).Push
	var ts []*asynq.Task
	for i, e := range emails {
		s, _ := addBrowser(t, d.store, svc, e)
		if _, err := d.store.AddDevice(ctx, s.ID, store.Device{Platform: store.PlatformFCM, Token: strings.Repeat(string(rune('a'+i)), 40)}); err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tasks.NewPush(tasks.PushPayload{Key: "ev:r", SubscriberID: s.ID, Topics: []string{topics.Updates}, Title: "Hi"}))
	}
	if err := runTask(ctx, tasks.Push, h.HandlePush, ts[0]); err != nil {
		t.Fatal(err)
	}
	err := runTask(ctx, tasks.Push, h.HandlePush, ts[1])
	if err == nil || IsFailure(err) || h.RetryDelay(0, err, ts[1]) != 700*time.Millisecond {
		t.Fatalf("past the platform's rate: %v, want a wait of the rate's 700ms that is no failure", err)
	}
	if len(svc.Received()) != 2 || len(fcm.accepted()) != 1 {
		t.Fatalf("%d browsers, %d apps", len(svc.Received()), len(fcm.accepted()))
	}
	rate.used = false
	if err := runTask(ctx, tasks.Push, h.HandlePush, ts[1]); err != nil || len(fcm.accepted()) != 2 || len(svc.Received()) != 2 {
		t.Fatalf("with room again: %v, %d apps, %d browsers", err, len(fcm.accepted()), len(svc.Received()))
	}
}

// TestPushServiceGate: a browser push service that hangs holds its own
// slots of the lane, no more: another browser of it waits (no failure),
// while a browser of another push service is notified at once; once the
// service answers again, both go.
func TestPushServiceGate(t *testing.T) {
	d := newDelivery(t)
	pub, priv, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	v, err := webpush.NewVAPID(pub, priv, "mailto:ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	g := netguard.Guard{AllowPrivate: true}
	client := webpush.NewClient(v, g.Client(netguard.Limits{Timeout: 5 * time.Second}))
	// Two push services (two hosts) for browsers of the same site.
	hung, other := webpushtest.New(t, pub), webpushtest.New(t, pub)
	ctx := context.Background()
	emails := seed(t, d.store, "s", 3)
	a, _ := addBrowser(t, d.store, hung, emails[0])
	b, _ := addBrowser(t, d.store, hung, emails[1])
	c, _ := addBrowser(t, d.store, other, emails[2])
	gates := &ServiceGates{Slots: 1, Wait: 20 * time.Millisecond}
	h := NewHandlers(Deps{Store: d.store, Push: client, Services: gates,
		PushRetry: RetryPolicy{Base: time.Millisecond, Max: time.Second}, Metrics: d.metrics, Log: discard}).Push
	task := func(id int64) *asynq.Task {
		return tasks.NewPush(tasks.PushPayload{Key: "ev:s", SubscriberID: id, Topics: []string{topics.Updates}, Title: "Hi"})
	}
	hung.Hang()
	first := make(chan error, 1)
	go func() { first <- runTask(ctx, tasks.Push, h.HandlePush, task(a.ID)) }()
	poll.True(t, poll.BusyMachine, "the first push holds its service's slot", func() bool {
		return len(gates.gate(serviceOf(hung.NewSubscription().Endpoint)).slots) == 1
	})
	err = runTask(ctx, tasks.Push, h.HandlePush, task(b.ID))
	if err == nil || IsFailure(err) || !strings.Contains(err.Error(), "slots") {
		t.Fatalf("a second browser of the hung service: %v, want a wait that is no failure", err)
	}
	if err := runTask(ctx, tasks.Push, h.HandlePush, task(c.ID)); err != nil || len(other.Received()) != 1 {
		t.Fatalf("a browser of another push service: %v, %d received", err, len(other.Received()))
	}
	hung.Recover()
	// The held request is answered 503 when the service recovers: that
	// task retries, as any 503.
	if err := <-first; err == nil || !IsFailure(err) {
		t.Fatalf("the held push: %v, want a retry", err)
	}
	for _, id := range []int64{a.ID, b.ID} {
		if err := runTask(ctx, tasks.Push, h.HandlePush, task(id)); err != nil {
			t.Fatal(err)
		}
	}
	if len(hung.Received()) != 2 {
		t.Fatalf("%d received after the recovery, want both browsers", len(hung.Received()))
	}
}
