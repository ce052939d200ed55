package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// FeedbackRecorder applies bounce and complaint reports, whatever their
// source (a report task, TypeFeedback, from the bounce intake, a provider's
// webhook or the generic endpoint; or the receiver's answer at sending,
// Deliverer.sendFailed), under the store's one policy
// (store.Suppressions.RecordFeedback): each lands in the person's history
// and export, counts against its issue or digest run, and changes the
// subscriber only as the policy says. A subscriber it suppresses is
// skipped by every handler's re-check from then on, a digest already
// planned included.
type FeedbackRecorder struct {
	Store   FeedbackStore
	Policy  store.FeedbackPolicy
	Metrics *Metrics
	Log     *slog.Logger
	// Notify queues subscriber.bounced and subscriber.complained when a
	// report changes a subscriber (nil: none).
	Notify *webhooks.Notifier
}

// FeedbackStore is what the recorder needs of the store.
type FeedbackStore interface {
	RecordFeedback(ctx context.Context, f store.Feedback, p store.FeedbackPolicy) (store.FeedbackResult, error)
}

// HandleFeedback handles TypeFeedback.
func (f *FeedbackRecorder) HandleFeedback(ctx context.Context, p tasks.FeedbackPayload) error {
	return f.Record(ctx, p)
}

// Record applies report p. An address not on the list is logged and
// counted, not an error; an error is the store's, worth a retry (an
// unknown type is SkipRetry). The report's id makes a repeat count once.
func (f *FeedbackRecorder) Record(ctx context.Context, p tasks.FeedbackPayload) error {
	typ := store.FeedbackType(p.Type)
	if !typ.Valid() {
		return fmt.Errorf("feedback type %q: %w", p.Type, asynq.SkipRetry)
	}
	report := store.Feedback{
		ID: p.ID, SubscriberID: p.SubscriberID, Email: p.Email, Type: typ,
		Digest: p.Kind == "" || p.Kind == mailer.KindDigest, Issue: p.IssueID,
	}
	res, err := f.Store.RecordFeedback(ctx, report, f.Policy)
	log := f.Log.With("source", p.Source, "type", p.Type, "domain", address.Domain(p.Email))
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Not on the list (any more), or a tag and an address that do
		// not agree: nothing to change, and nothing to retry.
		log.Info("feedback about an address not on the list", "subscriber", p.SubscriberID)
		f.Metrics.FeedbackUnmatched.WithLabelValues(p.Source).Inc()
		return nil
	case err != nil:
		return fmt.Errorf("record feedback: %w", err)
	case res.Duplicate:
		log.Info("feedback report seen before: ignored", "report", p.ID)
		return nil
	}
	if typ == store.Complaint {
		f.Metrics.Complaints.WithLabelValues(p.Source).Inc()
	} else {
		f.Metrics.Bounces.WithLabelValues(p.Type, p.Source).Inc()
	}
	if res.Changed {
		typ := tasks.WebhookSubscriberBounced
		if res.Subscriber.Status == store.Complained {
			typ = tasks.WebhookSubscriberComplained
		}
		f.Notify.NotifyLogged(ctx, webhooks.SubscriberEvent(typ, res.Subscriber, p.Source))
	}
	log.Info("feedback recorded", "subscriber", res.Subscriber.ID, "status", res.Subscriber.Status,
		"changed", res.Changed, "soft_bounces", res.SoftBounces, "kind", p.Kind, "issue", p.IssueID, "reason", p.Reason)
	return nil
}
