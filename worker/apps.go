package worker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/apns"
	"github.com/newsletter/newsletter/channels/fcm"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/store"
)

// AppSender sends one notification to one app install of its platform:
// channels/fcm's and channels/apns's clients (adapted where the service
// is put together). Its answers are read by the platform's channel
// (fcm.Classify, apns.Classify): Retire deletes the device, Drop drops
// the notification, Retry retries it, no sooner than the Outcome's After.
type AppSender interface {
	SendApp(ctx context.Context, token string, n webpush.Notification) error
}

// AppGate is one app platform's sender behind its own concurrency inside
// the push lane: a platform that is slow holds at most Slots of the
// lane's workers, and a notification that finds no slot free within
// Wait is retried later rather than held, so browsers and the other
// platform keep the lane's workers. (Each platform also keeps its own
// connection: one HTTP/2 connection carries its concurrent requests.)
type AppGate struct {
	Sender AppSender
	// Rate, when set, is the platform's own rate, shared by every push
	// worker (NEWSLETTER_FCM_RATE, NEWSLETTER_APNS_RATE): a notification
	// past it waits its turn in the queue, not in a worker.
	Rate interface {
		TakeN(ctx context.Context, n int) (int, time.Duration, error)
	}
	slots chan struct{}
	wait  time.Duration
}

// DefaultAppSlots is how many of a push worker's notifications one app
// platform may have in flight at once unless told (the service gives each
// platform a quarter of NEWSLETTER_PUSH_CONCURRENCY); DefaultAppWait how
// long one waits for a slot before it is retried.
const (
	DefaultAppSlots = 16
	DefaultAppWait  = 200 * time.Millisecond
)

// NewAppGate gates s: slots at once (DefaultAppSlots when <= 0), each
// waiting at most wait for one (DefaultAppWait when <= 0).
func NewAppGate(s AppSender, slots int, wait time.Duration) *AppGate {
	if slots <= 0 {
		slots = DefaultAppSlots
	}
	if wait <= 0 {
		wait = DefaultAppWait
	}
	return &AppGate{Sender: s, slots: make(chan struct{}, slots), wait: wait}
}

// send sends under a slot and within the platform's rate, or answers a
// *Deferred: every slot was taken for the whole wait (again in a second),
// or the rate is spent (again when it has room). Neither counts against
// the task's retries.
func (g *AppGate) send(ctx context.Context, token string, n webpush.Notification) error {
	return g.hold(ctx, func() error {
		if g.Rate != nil {
			got, wait, err := g.Rate.TakeN(ctx, 1)
			if err != nil {
				return err
			}
			if got == 0 {
				return &Deferred{Reason: "the app platform's rate", In: wait}
			}
		}
		return g.Sender.SendApp(ctx, token, n)
	})
}

// appMark is the delivery mark of key's notification to one app install
// of subscriber id.
func appMark(key string, id int64, d store.Device) store.Mark {
	return store.Mark{Kind: PushMarkKind, Key: key + ":app:" + d.ID, SubscriberID: id}
}

// devices are the person's app installs on the platforms this worker can
// send to.
func (h *PushSender) devices(ctx context.Context, id int64) ([]store.Device, error) {
	if len(h.Apps) == 0 {
		return nil, nil
	}
	all, err := h.Store.DevicesOf(ctx, []int64{id})
	if err != nil {
		return nil, fmt.Errorf("push: load devices: %w", err)
	}
	var out []store.Device
	for _, d := range all[0] {
		if h.Apps[d.Platform] != nil {
			out = append(out, d)
		}
	}
	return out, nil
}

// notifyApp sends n to one of the reader's app installs, whose mark the
// task has claimed, and settles the mark as notifyBrowser does: a dead
// token deletes the device, a refusal drops it, anything else retries.
func (h *PushSender) notifyApp(ctx context.Context, subID int64, d store.Device, mark store.Mark, n webpush.Notification) error {
	err := h.Apps[d.Platform].send(ctx, d.Token, n)
	out := classifyApp(d.Platform, err)
	if out.Verdict == channels.Sent {
		if merr := h.Store.MarkSent(context.WithoutCancel(ctx), mark); merr != nil {
			h.Log.Error("push: mark sent failed after delivery", "subscriber", subID, "err", merr)
		}
		h.countApp(d.Platform, "sent")
		return nil
	}
	if rerr := h.Store.ReleaseMarks(context.Background(), []store.Mark{mark}); rerr != nil {
		h.Log.Warn("push: claim not released", "err", rerr)
	}
	if errors.As(err, new(*Deferred)) {
		return err // its slots or its rate (the lane's gate): later, not a failure
	}
	switch out.Verdict {
	case channels.Retire:
		if derr := h.Store.DeleteDevice(ctx, subID, d.ID); derr != nil && !errors.Is(derr, store.ErrNoDevice) {
			return fmt.Errorf("push: delete a dead device token: %w", derr)
		}
		h.Log.Info("push: device token dead, deleted", "subscriber", subID, "platform", d.Platform, "device", d.ID)
		h.countApp(d.Platform, "dropped")
	case channels.Drop:
		h.Log.Warn("push: refused, not retried", "subscriber", subID, "platform", d.Platform, "err", err)
		h.countApp(d.Platform, "dead")
	default:
		h.countApp(d.Platform, "retry")
		return &deliveryFailure{msg: d.Platform + ": " + err.Error(), wait: out.After}
	}
	return nil
}

// appClassify is each app platform's channel's Classify: what its answer
// means for the notification and the device.
var appClassify = map[string]func(error) channels.Outcome{
	store.PlatformFCM:  fcm.Classify,
	store.PlatformAPNs: apns.Classify,
}

// classifyApp is the Outcome of platform's answer; a platform without a
// channel of its own is read as web push reads its push services (the
// classes every push sender's errors share).
func classifyApp(platform string, err error) channels.Outcome {
	if classify, ok := appClassify[platform]; ok {
		return classify(err)
	}
	return webpush.Classify(err)
}

// countApp counts an app notification's result in the push lane, by
// platform as well (newsletter_notifications_total's lane label stays
// "push": the lane is what an operator scales).
func (h *PushSender) countApp(platform, result string) {
	h.count(result)
	if h.Metrics != nil && h.Metrics.AppNotifications != nil {
		h.Metrics.AppNotifications.WithLabelValues(platform, result).Inc()
	}
}

// ServiceGates are the browsers' push services' gates (one per push
// service host: Google's, Mozilla's, Apple's…), made as they are first
// met, each with slots as an app platform has: a push service that hangs
// holds that many of the lane's workers, not all of them, and the app
// platforms and the other push services keep the rest.
type ServiceGates struct {
	Slots int
	Wait  time.Duration
	mu    sync.Mutex
	gates map[string]*AppGate
}

// serviceOf names a browser's push service: its endpoint's host and port.
func serviceOf(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	return u.Host
}

// gate is host's gate.
func (s *ServiceGates) gate(host string) *AppGate {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gates == nil {
		s.gates = map[string]*AppGate{}
	}
	g, ok := s.gates[host]
	if !ok {
		g = NewAppGate(nil, s.Slots, s.Wait)
		s.gates[host] = g
	}
	return g
}

// hold runs send under a slot of host's gate, or answers a *Deferred
// when every slot stayed taken for the gate's wait.
func (g *AppGate) hold(ctx context.Context, send func() error) error {
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
	case <-t.C:
		return &Deferred{Reason: "the push service's slots are all in use", In: time.Second}
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-g.slots }()
	return send()
}
