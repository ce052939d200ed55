package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/internal/token"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
)

// ErrDeliveryBusy means another run holds the delivery mark: the same mail
// is being sent right now, or a worker died holding it. The task is retried
// after the claim could have expired; it is not a failure.
var ErrDeliveryBusy = errors.New("delivery mark is held by another run")

// DefaultClaimTTL bounds how long a dead worker's claim blocks a retry. It
// is longer than any task's timeout, so a live sender never loses its claim.
const DefaultClaimTTL = 3 * time.Minute

// Links builds the URLs inside mails.
type Links struct {
	BaseURL string
	Signer  *token.Signer
}

// Confirm is the confirmation link for email.
func (l Links) Confirm(email string) string {
	return l.BaseURL + "/confirm?token=" + url.QueryEscape(l.Signer.Sign(token.Confirm, email))
}

// Unsubscribe is the unsubscribe link for email (page and RFC 8058 target).
func (l Links) Unsubscribe(email string) string {
	return l.BaseURL + "/unsubscribe?token=" + url.QueryEscape(l.Signer.Sign(token.Unsubscribe, email))
}

// Handlers hold what the task handlers depend on.
type Handlers struct {
	Store    store.Store
	Mailer   mailer.Mailer
	Render   *mailer.Renderer
	Links    Links
	Metrics  *Metrics
	Log      *slog.Logger
	Now      func() time.Time
	ClaimTTL time.Duration
	// Pace, when set, holds bulk mail to the shared send rate and honours
	// domains that asked us to slow down.
	Pace Pacer
	// Throttle is how long such a domain is paused (DefaultThrottle).
	Throttle time.Duration

	// Queue and Depth let the digest planner enqueue batches and watch the
	// critical queue's depth (back pressure).
	Queue Enqueuer
	Depth QueueInspector
	// DigestBatch is recipients per batch (DefaultDigestBatch);
	// MaxPendingBatches is how many may wait in the queue before the
	// planner pauses (DefaultMaxPendingBatches).
	DigestBatch       int
	MaxPendingBatches int
	// QuietHours holds bulk mail during a local-time window.
	QuietHours *config.QuietHours

	quietOnce sync.Once
	quietWin  *quietHours
	entriesMu sync.Mutex
	entries   map[string][]mailer.Entry
}

func (h *Handlers) quiet() *quietHours {
	h.quietOnce.Do(func() { h.quietWin = newQuietHours(h.QuietHours) })
	return h.quietWin
}

func (h *Handlers) claimTTL() time.Duration {
	if h.ClaimTTL > 0 {
		return h.ClaimTTL
	}
	return DefaultClaimTTL
}

func (h *Handlers) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Handlers) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

// HandleConfirm sends the confirmation mail to a pending subscriber.
func (h *Handlers) HandleConfirm(ctx context.Context, t *asynq.Task) error {
	var p ConfirmPayload
	if err := decode(t, &p); err != nil {
		return err
	}
	if p.Email == "" || p.Nonce == "" {
		return errMissing(t, "email or nonce")
	}
	sub, ok, err := h.recipient(ctx, p.Email, store.Pending)
	if !ok {
		return err
	}
	data := mailer.Data{Email: sub.Email, Name: sub.Name, ConfirmURL: h.Links.Confirm(sub.Email)}
	return h.deliver(ctx, sub, store.Mark{Kind: mailer.KindConfirm, Key: p.Nonce, SubscriberID: sub.ID}, data)
}

// HandleWelcome sends the welcome mail to an active subscriber, once per
// subscriber.
func (h *Handlers) HandleWelcome(ctx context.Context, t *asynq.Task) error {
	var p WelcomePayload
	if err := decode(t, &p); err != nil {
		return err
	}
	if p.Email == "" {
		return errMissing(t, "email")
	}
	sub, ok, err := h.recipient(ctx, p.Email, store.Active)
	if !ok {
		return err
	}
	data := mailer.Data{Email: sub.Email, Name: sub.Name, UnsubscribeURL: h.Links.Unsubscribe(sub.Email)}
	return h.deliver(ctx, sub, store.Mark{Kind: mailer.KindWelcome, SubscriberID: sub.ID, Shared: true}, data)
}

// recipient re-reads the subscriber right before sending. ok is false when
// nothing should be sent; err is then nil (skip) or a store failure (retry).
func (h *Handlers) recipient(ctx context.Context, email string, want store.Status) (store.Subscriber, bool, error) {
	sub, err := h.Store.Get(ctx, email)
	if errors.Is(err, store.ErrNotFound) {
		h.log().Info("skip: unknown subscriber", "domain", address.Domain(email))
		return sub, false, nil
	}
	if err != nil {
		return sub, false, fmt.Errorf("load subscriber: %w", err)
	}
	if sub.Status != want {
		h.log().Info("skip: subscription not "+string(want), "subscriber", sub.ID, "status", sub.Status)
		return sub, false, nil
	}
	return sub, true, nil
}

// deliver claims the mark, renders, sends and records the outcome.
func (h *Handlers) deliver(ctx context.Context, sub store.Subscriber, mark store.Mark, data mailer.Data) error {
	claim, err := h.Store.ClaimMark(ctx, mark, h.claimTTL())
	if err != nil {
		return fmt.Errorf("claim delivery: %w", err)
	}
	switch claim {
	case store.AlreadySent:
		h.log().Info("skip: already sent", "kind", mark.Kind, "subscriber", sub.ID)
		return nil
	case store.Busy:
		return fmt.Errorf("%s to subscriber %d: %w", mark.Kind, sub.ID, ErrDeliveryBusy)
	}
	if err := h.newPacer(ctx).wait(ctx, address.Domain(sub.Email), mark.Kind != mailer.KindConfirm, 1); err != nil {
		h.Store.ReleaseMark(ctx, mark)
		return err
	}
	return h.send(ctx, h.Mailer, sub, mark, data)
}

// send renders mark's kind of mail for sub, sends it through m and records
// the outcome: the metric and the sent mark, or the claim released and the
// failure classified (sendFailed). The caller holds mark's claim.
func (h *Handlers) send(ctx context.Context, m mailer.Mailer, sub store.Subscriber, mark store.Mark, data mailer.Data) error {
	msg, err := h.Render.Render(mark.Kind, data)
	if err != nil {
		h.Store.ReleaseMark(ctx, mark)
		h.countFailure(mark.Kind, mailer.Invalid)
		return fmt.Errorf("render %s: %v: %w", mark.Kind, err, asynq.SkipRetry)
	}
	if err := m.Send(ctx, msg); err != nil {
		// Release even when the outcome is unknown (connection dropped
		// after DATA): keeping the claim would only delay the same retry.
		if rerr := h.Store.ReleaseMark(ctx, mark); rerr != nil {
			h.log().Warn("release delivery mark", "err", rerr)
		}
		return h.sendFailed(ctx, sub, mark.Kind, err)
	}
	if h.Metrics != nil {
		h.Metrics.Sent.WithLabelValues(mark.Kind).Inc()
	}
	if err := h.Store.MarkSent(ctx, mark); err != nil {
		// The mail is out. Returning an error would retry and could send
		// it again once the claim expires; a missing mark costs nothing
		// more than that, so log and succeed.
		h.log().Error("mark sent failed after delivery", "kind", mark.Kind, "subscriber", sub.ID, "err", err)
	}
	return nil
}

func (h *Handlers) countFailure(kind string, c mailer.Class) {
	if h.Metrics != nil {
		h.Metrics.Failed.WithLabelValues(kind, c.String()).Inc()
	}
}

// sendFailed decides between retry, suppression and alerting.
func (h *Handlers) sendFailed(ctx context.Context, sub store.Subscriber, kind string, err error) error {
	se := mailer.AsSendError(err)
	if se == nil {
		se = &mailer.SendError{Class: mailer.Temporary, Domain: address.Domain(sub.Email), Err: err}
	}
	h.countFailure(kind, se.Class)
	h.log().Warn("send failed", "kind", kind, "subscriber", sub.ID, "domain", se.Domain,
		"class", se.Class.String(), "code", se.Code, "enhanced", se.Enhanced)
	switch se.Class {
	case mailer.Throttled:
		if h.Pace != nil {
			d := h.Throttle
			if d <= 0 {
				d = DefaultThrottle
			}
			if err := h.Pace.Throttle(ctx, se.Domain, d); err != nil {
				h.log().Warn("pause domain", "domain", se.Domain, "err", err)
			}
		}
	case mailer.Bounced:
		if err := h.Store.MarkBounced(ctx, sub.Email); err != nil {
			return fmt.Errorf("mark bounced after %v: %w", se, err) // retry; the next try bounces again
		}
		return fmt.Errorf("%w: %w", se, asynq.SkipRetry)
	case mailer.Rejected, mailer.Invalid:
		return fmt.Errorf("%w: %w", se, asynq.SkipRetry)
	}
	return se
}
