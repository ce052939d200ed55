package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/push"
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
	Push  push.Sender
	// Apps send to app installs, by platform (store.PlatformFCM,
	// store.PlatformAPNs), each behind its own gate (apps.go); a
	// platform without one is not notified.
	Apps map[string]*AppGate
	// Services gate the browsers' push services, one gate per host (nil:
	// no gate: a push service that hangs may hold every worker).
	Services *ServiceGates
	// Retry is the lane's backoff; a push service's Retry-After wins when
	// it asks for longer.
	Retry     RetryPolicy
	ClaimTTL  time.Duration
	RedisWait time.Duration
	Metrics   *Metrics
	Log       *slog.Logger
}

func (h *PushSender) away() redisWait { return redisWait{For: h.RedisWait, Log: h.Log} }

// awaited is the push sender's store waiting out an unreachable Redis.
func (h *PushSender) awaited() awaitPush { return awaitPush{s: h.Store, w: h.away()} }

// pushMark is the delivery mark of key's notification to one browser of
// subscriber id (the endpoint hashed: it is long, and a URL is no key).
func pushMark(key string, id int64, endpoint string) store.Mark {
	sum := sha256.Sum256([]byte(endpoint))
	return store.Mark{Kind: PushMarkKind, Key: key + ":" + hex.EncodeToString(sum[:8]), SubscriberID: id}
}

// HandlePush handles push:deliver. A person no longer active, or without
// any of the notification's topics (they turned it off since the
// fan-out), gets nothing; nor does a browser removed since. A browser
// whose push service answers 404 or 410 is deleted; any other refusal
// drops that browser's notification (retrying cannot help); a 429, a 5xx,
// a timeout or a network error retries the task for the browsers left.
func (h *PushSender) HandlePush(ctx context.Context, p tasks.PushPayload) error {
	return inOrder(ctx, h.Store, h.away(), store.ChannelPush, p.Key, p.SubscriberID, p.At, func() error { return h.notify(ctx, p) })
}

// notify is HandlePush once the event's turn has come for its person.
func (h *PushSender) notify(ctx context.Context, p tasks.PushPayload) error {
	sub, ok, err := h.recipient(ctx, p)
	if err != nil || !ok {
		return err
	}
	var browsers []store.PushSubscription
	if h.Push != nil { // web push is on
		if browsers, err = h.awaited().PushSubscriptions(ctx, sub.ID); err != nil {
			return fmt.Errorf("push: load browsers: %w", err)
		}
	}
	apps, err := h.devices(ctx, sub.ID)
	if err != nil {
		return err
	}
	if len(browsers) == 0 && len(apps) == 0 {
		h.count("dropped")
		return nil
	}
	n := push.Notification{Title: p.Title, Body: p.Body, URL: p.URL}
	payload, err := n.Payload()
	if err != nil {
		h.count("dead")
		return fmt.Errorf("push: %v: %w", err, asynq.SkipRetry)
	}
	// Every browser and every app install has a mark of its own: a
	// retry sends only to those that have not got it.
	marks := make([]store.Mark, 0, len(browsers)+len(apps))
	for _, b := range browsers {
		marks = append(marks, pushMark(p.Key, sub.ID, b.Endpoint))
	}
	for _, d := range apps {
		marks = append(marks, appMark(p.Key, sub.ID, d))
	}
	owner, _ := asynq.GetTaskID(ctx)
	claims, err := h.awaited().ClaimMarks(ctx, owner, marks, h.ClaimTTL)
	if err != nil {
		return fmt.Errorf("push: claim: %w", err)
	}
	var retry error
	for i := range marks {
		switch claims[i] {
		case store.AlreadySent:
			continue
		case store.Busy:
			retry = firstErr(retry, ErrDeliveryBusy)
			continue
		}
		// Browsers first: a slow or failing app platform delays no
		// browser of the person's.
		if i < len(browsers) {
			retry = firstErr(retry, h.notifyBrowser(ctx, sub.ID, browsers[i], marks[i], payload))
		} else {
			retry = firstErr(retry, h.notifyApp(ctx, sub.ID, apps[i-len(browsers)], marks[i], n))
		}
	}
	return retry
}

// recipient loads the notification's reader. Not ok with a nil error
// means the notification is dropped (counted): the reader is gone, not
// active, or no longer follows any of its topics.
func (h *PushSender) recipient(ctx context.Context, p tasks.PushPayload) (sub store.Subscriber, ok bool, err error) {
	sub, err = h.awaited().GetByID(ctx, p.SubscriberID)
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
		return h.Push.Send(ctx, push.Subscription{Endpoint: b.Endpoint, P256DH: b.P256DH, Auth: b.Auth}, payload, push.Options{})
	}
	var err error
	if h.Services != nil {
		err = h.Services.gate(serviceOf(b.Endpoint)).hold(ctx, send)
	} else {
		err = send()
	}
	if err == nil {
		// Not under the task's context: the notification is out, and
		// its mark must be written even if the task was cancelled.
		if merr := h.awaited().MarkSent(context.Background(), mark); merr != nil {
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
	switch {
	case errors.As(err, new(*Deferred)):
		return err // its push service's slots: later, not a failure
	case errors.Is(err, push.ErrGone):
		if derr := h.Store.DeletePushSubscription(ctx, subID, b.Endpoint); derr != nil {
			// Retried: the push service says gone again, and the
			// delete is tried again.
			return fmt.Errorf("push: delete a gone subscription: %w", derr)
		}
		h.Log.Info("push: subscription gone, deleted", "subscriber", subID, "host", hostOf(b.Endpoint))
		h.count("dropped")
	case push.Permanent(err):
		h.Log.Warn("push: refused, not retried", "subscriber", subID, "host", hostOf(b.Endpoint), "err", err)
		h.count("dead")
	default:
		h.count("retry")
		return &deliveryFailure{msg: err.Error(), wait: push.RetryAfter(err)}
	}
	return nil
}

// RetryDelay is the push lane's asynq RetryDelayFunc: the lane's backoff,
// or the push service's Retry-After when that is longer.
func (h *PushSender) RetryDelay(n int, err error, t *asynq.Task) time.Duration {
	d := h.Retry.Delay(n, err, t)
	var f *deliveryFailure
	if errors.As(err, &f) && f.wait > d {
		return f.wait
	}
	return d
}

func (h *PushSender) count(result string) {
	h.Metrics.Notifications.WithLabelValues(LanePush, result).Inc()
}
