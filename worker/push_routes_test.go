package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/internal/testkit/poll"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// TestPushRetryWaitsForTheLongestRetryAfter: a person's two devices both
// ask to wait, the first registered for 10 seconds, the second for two
// minutes; the task is retried no sooner than two minutes (the first
// error used to win), and the device that took it is not sent it twice.
func TestPushRetryWaitsForTheLongestRetryAfter(t *testing.T) {
	d := newDelivery(t)
	ctx := context.Background()
	email := seed(t, d.store, "r", 1)[0]
	sub, err := d.store.Get(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	shortTok, longTok, okTok := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("cd", 32)
	for _, dev := range []store.Device{{Platform: store.PlatformFCM, Token: shortTok}, {Platform: store.PlatformFCM, Token: longTok}, {Platform: store.PlatformAPNs, Token: okTok}} {
		if _, err := d.store.AddDevice(ctx, sub.ID, dev); err != nil {
			t.Fatal(err)
		}
	}
	fcm, apns := &appPlatform{}, &appPlatform{}
	fcm.set(shortTok, &webpush.StatusError{Status: http.StatusServiceUnavailable, RetryAfter: 10 * time.Second})
	fcm.set(longTok, &webpush.StatusError{Status: http.StatusTooManyRequests, RetryAfter: 2 * time.Minute})
	h := NewHandlers(Deps{Store: d.store, Apps: map[string]*AppGate{store.PlatformFCM: NewAppGate(fcm, 0, 0), store.PlatformAPNs: NewAppGate(apns, 0, 0)},
		PushRetry: RetryPolicy{Base: time.Millisecond, Max: time.Second}, Metrics: d.metrics, Log: discard}).Push
	task := tasks.NewPush(tasks.PushPayload{Key: "ev:wait", SubscriberID: sub.ID, Topics: []string{topics.Updates}, Title: "Hello"})

	err = runTask(ctx, tasks.Push, h.HandlePush, task)
	if wait := h.RetryDelay(0, err, task); err == nil || wait < 2*time.Minute {
		t.Fatalf("err %v: retry in %s, want the longest Retry-After, 2m", err, wait)
	}
	fcm.set(shortTok, nil)
	fcm.set(longTok, nil)
	if err := runTask(ctx, tasks.Push, h.HandlePush, task); err != nil {
		t.Fatal(err)
	}
	if got := apns.accepted(); len(got) != 1 {
		t.Fatalf("APNs took %d, want 1: the delivered device is not sent it again", len(got))
	}
	if got := fcm.accepted(); len(got) != 2 {
		t.Fatalf("FCM took %v, want both devices once", got)
	}
}

// TestHungFCMHoldsNeitherAPNsNorBrowsers: while FCM hangs on a person's
// Android device, their iPhone and browser get the event, and their next
// event reaches the iPhone and browser too (each way keeps its own
// order); FCM gets both, in the order posted, once it answers.
func TestHungFCMHoldsNeitherAPNsNorBrowsers(t *testing.T) {
	d := newDelivery(t)
	svc, client := newPushService(t)
	ctx := context.Background()
	email := seed(t, d.store, "h", 1, func(r *store.SubscribeRequest) { r.Topics = []string{topics.Updates} })[0]
	sub, _ := addBrowser(t, d.store, svc, email)
	androidTok, iphoneTok := strings.Repeat("e", 40), strings.Repeat("fa", 32)
	for _, dev := range []store.Device{{Platform: store.PlatformFCM, Token: androidTok}, {Platform: store.PlatformAPNs, Token: iphoneTok}} {
		if _, err := d.store.AddDevice(ctx, sub.ID, dev); err != nil {
			t.Fatal(err)
		}
	}
	fcm, apns := &recordingPlatform{appPlatform: appPlatform{hold: make(chan struct{})}}, &recordingPlatform{}
	h := NewHandlers(Deps{Store: d.store, Push: client, Apps: map[string]*AppGate{store.PlatformFCM: NewAppGate(fcm, 0, 0), store.PlatformAPNs: NewAppGate(apns, 0, 0)},
		PushRetry: RetryPolicy{Base: time.Millisecond, Max: time.Second}, Metrics: d.metrics, Log: discard}).Push
	posted := time.Now()
	event := func(key, title string, at time.Time) *asynq.Task {
		t.Helper()
		for _, order := range pushOrders {
			if err := d.store.QueueInOrder(ctx, order, key, at, []int64{sub.ID}); err != nil {
				t.Fatal(err)
			}
		}
		return tasks.NewPush(tasks.PushPayload{Key: key, SubscriberID: sub.ID, Topics: []string{topics.Updates}, Title: title, At: at})
	}
	first, second := event("ev:1", "Order placed", posted), event("ev:2", "Order shipped", posted.Add(time.Second))

	done := make(chan error, 1)
	go func() { done <- runTask(ctx, tasks.Push, h.HandlePush, first) }()
	// The first event reaches the iPhone and the browser, and is done with
	// on both ways while FCM hangs: the person's next event has its turn
	// there. Arriving is not yet done: a browser's push service and APNs
	// have it before the task marks it sent and takes it out of the
	// person's order, and until then the next event rightly waits.
	poll.Until(t, poll.BusyMachine, func() error {
		if len(apns.titles()) < 1 || len(svc.Received()) < 1 {
			return fmt.Errorf("APNs took %v, the browser %d, while FCM hangs", apns.titles(), len(svc.Received()))
		}
		for _, order := range []string{store.ChannelPush, store.ChannelPush + ":" + store.PlatformAPNs} {
			if turn, err := d.store.Turn(ctx, order, "ev:2", sub.ID); err != nil || !turn {
				return fmt.Errorf("the first event is not done with on %s while FCM hangs (turn of the next: %v, %v)", order, turn, err)
			}
		}
		return nil
	})
	// The next event: APNs and the browser need not wait for the first
	// event's FCM; its own FCM does (a deferral, not a failure).
	err := runTask(ctx, tasks.Push, h.HandlePush, second)
	var wait *Deferred
	if !errors.As(err, &wait) || IsFailure(err) {
		t.Fatalf("the second event while FCM hangs: %v, want its FCM to wait its turn", err)
	}
	if got := apns.titles(); len(got) != 2 || got[1] != "Order shipped" || len(svc.Received()) != 2 {
		t.Fatalf("APNs took %q and the browser %d: want both events", got, len(svc.Received()))
	}
	if len(fcm.titles()) != 0 {
		t.Fatalf("FCM took %q while hanging", fcm.titles())
	}
	close(fcm.hold)
	if err := <-done; err != nil {
		t.Fatalf("the first event once FCM answered: %v", err)
	}
	if err := runTask(ctx, tasks.Push, h.HandlePush, second); err != nil {
		t.Fatal(err)
	}
	if got := fcm.titles(); len(got) != 2 || got[0] != "Order placed" || got[1] != "Order shipped" {
		t.Fatalf("FCM took %q, want both in the order posted", got)
	}
	if len(apns.titles()) != 2 || len(svc.Received()) != 2 {
		t.Fatalf("APNs took %q, the browser %d: someone got an event twice", apns.titles(), len(svc.Received()))
	}
}

// recordingPlatform is an app platform that records the titles it took,
// and can hang until hold is closed.
type recordingPlatform struct {
	appPlatform
	taken []string
}

func (r *recordingPlatform) SendApp(ctx context.Context, token string, n webpush.Notification) error {
	if err := r.appPlatform.SendApp(ctx, token, n); err != nil {
		return err
	}
	r.mu.Lock()
	r.taken = append(r.taken, n.Title)
	r.mu.Unlock()
	return nil
}

func (r *recordingPlatform) titles() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.taken...)
}
