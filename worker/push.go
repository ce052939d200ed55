package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/channels"
	"github.com/newsletter/newsletter/channels/webpush"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// LanePush is the push lane's label value.
const LanePush = tasks.LanePush

// PushMarkKind is the delivery mark kind of one notification to one
// browser.
const PushMarkKind = "push"

// PushStore is what the push lane's handler needs of the store.
type PushStore interface {
	GetByID(ctx context.Context, id int64) (store.Subscriber, error)
	PushSubscriptions(ctx context.Context, id int64) ([]store.PushSubscription, error)
	DeletePushSubscription(ctx context.Context, id int64, endpoint string) error
	DevicesOf(ctx context.Context, ids []int64) ([][]store.Device, error)
	DeleteDevice(ctx context.Context, id int64, deviceID string) error
	OrderStore
	store.Marks
}

// PushSender handles push:deliver in the push lane: one person's
// notification to each of their browsers, each under a delivery mark of
// its own, so a retry (a 503, a push service that timed out, a killed
// worker) sends only to the browsers that have not got it. As with mail,
// the one way to get it twice is a worker killed between the push
// service's 201 and the mark: at most one notification per sender, the
// lane's concurrency.
type PushSender struct {
	Store PushStore
	Push  webpush.Sender
	// Apps send to app installs, by platform (store.PlatformFCM,
	// store.PlatformAPNs), each behind its own gate (apps.go); a
	// platform without one is not notified.
	Apps map[string]*AppGate
	// Services gate the browsers' push services, one gate per host (nil:
	// no gate: a push service that hangs may hold every worker).
	Services *ServiceGates
	// Retry is the lane's backoff; a push service's Retry-After wins when
	// it asks for longer.
	Retry    RetryPolicy
	ClaimTTL time.Duration
	Metrics  *Metrics
	Log      *slog.Logger
}

// pushMark is the delivery mark of key's notification to one browser of
// subscriber id (the endpoint hashed: it is long, and a URL is no key).
func pushMark(key string, id int64, endpoint string) store.Mark {
	sum := sha256.Sum256([]byte(endpoint))
	return store.Mark{Kind: PushMarkKind, Key: key + ":" + hex.EncodeToString(sum[:8]), SubscriberID: id}
}

// pushOrders are the person's orders of the push channel, one per way a
// notification goes: browsers (store.ChannelPush, the order earlier
// releases kept for the whole channel), FCM and APNs. Each is sent apart
// from the others and waits only for itself: an FCM that hangs holds
// neither the person's iPhone nor their browser, and the person's next
// event on APNs does not wait for this one's FCM.
var pushOrders = []string{store.ChannelPush, store.ChannelPush + ":" + store.PlatformFCM, store.ChannelPush + ":" + store.PlatformAPNs}

// pushRoute is one of a notification's ways to its person: the
// addresses in one order (pushOrders), each with its delivery mark and
// its send.
type pushRoute struct {
	marks []store.Mark
	sends []func() error
}

// HandlePush handles push:deliver. A person no longer active, or without
// any of the notification's topics (they turned it off since the
// fan-out), gets nothing; nor does a browser or device removed since.
// Browsers, FCM devices and APNs devices go at once, each in the person's
// order of its own (pushOrders), one address after another. A browser
// whose push service answers 404 or 410 is deleted, as is a device its
// platform calls unregistered; any other refusal drops that address's
// notification (retrying cannot help); a 429, a 5xx, a timeout or a
// network error retries the task for the addresses left, no sooner than
// the longest Retry-After any of them asked for.
func (h *PushSender) HandlePush(ctx context.Context, p tasks.PushPayload) error {
	sub, ok, err := h.recipient(ctx, p)
	if err != nil {
		return err
	}
	routes := make([]pushRoute, len(pushOrders))
	if ok {
		if routes, err = h.routes(ctx, p, sub.ID); err != nil {
			return err
		}
	}
	errs := make([]error, len(pushOrders))
	var wg sync.WaitGroup
	for i, order := range pushOrders {
		wg.Go(func() {
			if len(routes[i].marks) == 0 {
				// Nothing to send this way: out of the order at once,
				// without waiting for its turn.
				errs[i] = h.leave(order, p)
				return
			}
			errs[i] = inOrder(ctx, h.Store, order, p.Key, p.SubscriberID, p.At, func() error { return h.sendRoute(ctx, routes[i]) })
		})
	}
	wg.Wait()
	err = laterRetry(errs...)
	if err != nil && !p.At.IsZero() && settled(ctx, err) {
		// The task is given up (its last attempt): a way that was only
		// waiting its turn is done with too, or it would hold the
		// person's next events there until it went stale.
		for _, order := range pushOrders {
			if lerr := h.leave(order, p); lerr != nil {
				err = errors.Join(err, lerr)
			}
		}
	}
	return err
}

// leave takes an event with nothing to send on one of the person's orders
// out of it (an issue's notification is in none).
func (h *PushSender) leave(order string, p tasks.PushPayload) error {
	if p.At.IsZero() {
		return nil
	}
	if err := h.Store.Leave(context.Background(), order, p.Key, p.SubscriberID); err != nil {
		return fmt.Errorf("%s: leave the order: %w", order, err)
	}
	return nil
}

// routes sorts the reader's browsers and app installs into their routes,
// lined up with pushOrders.
func (h *PushSender) routes(ctx context.Context, p tasks.PushPayload, subID int64) ([]pushRoute, error) {
	routes := make([]pushRoute, len(pushOrders))
	var browsers []store.PushSubscription
	var err error
	if h.Push != nil { // web push is on
		if browsers, err = h.Store.PushSubscriptions(ctx, subID); err != nil {
			return nil, fmt.Errorf("push: load browsers: %w", err)
		}
	}
	apps, err := h.devices(ctx, subID)
	if err != nil {
		return nil, err
	}
	if len(browsers) == 0 && len(apps) == 0 {
		h.count("dropped")
		return routes, nil
	}
	n := webpush.Notification{Title: p.Title, Body: p.Body, URL: p.URL}
	payload, perr := n.Payload()
	for _, b := range browsers {
		routes[0].marks = append(routes[0].marks, pushMark(p.Key, subID, b.Endpoint))
		routes[0].sends = append(routes[0].sends, func() error {
			if perr != nil {
				h.count("dead")
				return fmt.Errorf("push: %v: %w", perr, asynq.SkipRetry)
			}
			return h.notifyBrowser(ctx, subID, b, pushMark(p.Key, subID, b.Endpoint), payload)
		})
	}
	for _, d := range apps {
		at := slices.Index(pushOrders, store.ChannelPush+":"+d.Platform)
		if at < 0 { // a gate for a platform the lane has no order for
			h.Log.Error("push: no order for the platform, device not notified", "platform", d.Platform, "device", d.ID)
			continue
		}
		r := &routes[at]
		r.marks = append(r.marks, appMark(p.Key, subID, d))
		r.sends = append(r.sends, func() error { return h.notifyApp(ctx, subID, d, appMark(p.Key, subID, d), n) })
	}
	return routes, nil
}

// sendRoute claims a route's marks and sends to each address whose mark
// it holds, one after another (every address has a mark of its own: a
// retry sends only to those that have not got it).
func (h *PushSender) sendRoute(ctx context.Context, r pushRoute) error {
	if len(r.marks) == 0 {
		return nil
	}
	owner, _ := asynq.GetTaskID(ctx)
	claims, err := h.Store.ClaimMarks(ctx, owner, r.marks, h.ClaimTTL)
	if err != nil {
		return fmt.Errorf("push: claim: %w", err)
	}
	var retry error
	for i := range r.marks {
		switch claims[i] {
		case store.AlreadySent:
			continue
		case store.Busy:
			retry = laterRetry(retry, ErrDeliveryBusy)
			continue
		}
		retry = laterRetry(retry, r.sends[i]())
	}
	return retry
}

// laterRetry is the one of errs the task returns: any retry before a
// give-up (SkipRetry: an address that gets it later must not be given up
// with it), and among retries the one that asks the longest wait (a
// platform's Retry-After, a gate's deferral), so no address is tried
// again before its platform asked; nil when all are nil.
func laterRetry(errs ...error) error {
	var kept error
	for _, err := range errs {
		switch {
		case err == nil:
		case kept == nil, errors.Is(kept, asynq.SkipRetry) && !errors.Is(err, asynq.SkipRetry):
			kept = err
		case !errors.Is(err, asynq.SkipRetry) && waitOf(err) > waitOf(kept):
			kept = err
		}
	}
	return kept
}

// waitOf is how long err asked the task to wait: a platform's
// Retry-After (deliveryFailure) or a deferral; 0 when it did not say.
func waitOf(err error) time.Duration {
	var f *deliveryFailure
	if errors.As(err, &f) {
		return f.wait
	}
	var ra retryAfterer
	if errors.As(err, &ra) {
		return ra.RetryAfter()
	}
	return 0
}

// recipient loads the notification's reader. Not ok with a nil error
// means the notification is dropped (counted): the reader is gone, not
// active, or no longer follows any of its topics.
func (h *PushSender) recipient(ctx context.Context, p tasks.PushPayload) (sub store.Subscriber, ok bool, err error) {
	sub, err = h.Store.GetByID(ctx, p.SubscriberID)
	if errors.Is(err, store.ErrNotFound) {
		h.count("dropped")
		return sub, false, nil
	}
	if err != nil {
		return sub, false, fmt.Errorf("push: load subscriber: %w", err)
	}
	if sub.Status != store.Active || !slices.ContainsFunc(p.Topics, func(tp string) bool { return slices.Contains(sub.Topics, tp) }) {
		h.Log.Info("push: skip, subscriber not active or topic off", "subscriber", sub.ID, "status", sub.Status)
		h.count("dropped")
		return sub, false, nil
	}
	return sub, true, nil
}

// notifyBrowser sends the payload to one of the reader's browsers, whose
// mark the task has claimed, and settles the mark. It returns the error
// the task retries on (nil: sent, or dropped for good).
func (h *PushSender) notifyBrowser(ctx context.Context, subID int64, b store.PushSubscription, mark store.Mark, payload []byte) error {
	send := func() error {
		return h.Push.Send(ctx, webpush.Subscription{Endpoint: b.Endpoint, P256DH: b.P256DH, Auth: b.Auth}, payload, webpush.Options{})
	}
	var err error
	if h.Services != nil {
		err = h.Services.gate(serviceOf(b.Endpoint)).hold(ctx, send)
	} else {
		err = send()
	}
	out := webpush.Classify(err)
	if out.Verdict == channels.Sent {
		// Not under the task's context: the notification is out, and
		// its mark must be written even if the task was cancelled.
		if merr := h.Store.MarkSent(context.WithoutCancel(ctx), mark); merr != nil {
			h.Log.Error("push: mark sent failed after delivery", "subscriber", subID, "err", merr)
		}
		h.count("sent")
		return nil
	}
	if rerr := h.Store.ReleaseMarks(context.Background(), []store.Mark{mark}); rerr != nil {
		// The claim expires on its own (ClaimTTL); the retry of this
		// same task takes it over sooner (a claim names its task).
		h.Log.Warn("push: claim not released", "err", rerr)
	}
	if errors.As(err, new(*Deferred)) {
		// Its push service's slots (the lane's gate, which the channel
		// knows nothing of): later, not a failure.
		return err
	}
	switch out.Verdict {
	case channels.Retire:
		if derr := h.Store.DeletePushSubscription(ctx, subID, b.Endpoint); derr != nil {
			// Retried: the push service says gone again, and the
			// delete is tried again.
			return fmt.Errorf("push: delete a gone subscription: %w", derr)
		}
		h.Log.Info("push: subscription gone, deleted", "subscriber", subID, "host", hostOf(b.Endpoint))
		h.count("dropped")
	case channels.Drop:
		h.Log.Warn("push: refused, not retried", "subscriber", subID, "host", hostOf(b.Endpoint), "err", err)
		h.count("dead")
	default:
		h.count("retry")
		return &deliveryFailure{msg: err.Error(), wait: out.After}
	}
	return nil
}

// RetryDelay is the push lane's asynq RetryDelayFunc: the lane's backoff,
// or the push service's Retry-After when that is longer.
func (h *PushSender) RetryDelay(n int, err error, t *asynq.Task) time.Duration {
	return h.Retry.ProviderDelay(n, err, t)
}

func (h *PushSender) count(result string) {
	h.Metrics.Notifications.WithLabelValues(LanePush, result).Inc()
}
