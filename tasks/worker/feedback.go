package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/webhook"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// FeedbackRecorder applies bounce and complaint reports (TypeFeedback),
// whatever their source, under the store's one policy
// (store.Suppressions.RecordFeedback). A subscriber it suppresses is
// skipped by every handler's re-check from then on, a digest already
// planned included.
type FeedbackRecorder struct {
	Store   store.Suppressions
	Policy  store.FeedbackPolicy
	Metrics *Metrics
	Log     *slog.Logger
	// Notify queues subscriber.bounced and subscriber.complained when a
	// report changes a subscriber (nil: none).
	Notify *tasks.WebhookNotifier
}

// HandleFeedback handles TypeFeedback.
func (f *FeedbackRecorder) HandleFeedback(ctx context.Context, t *asynq.Task) error {
	var p tasks.FeedbackPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return fmt.Errorf("feedback payload: %v: %w", err, asynq.SkipRetry)
	}
	typ := store.FeedbackType(p.Type)
	if !typ.Valid() {
		return fmt.Errorf("feedback type %q: %w", p.Type, asynq.SkipRetry)
	}
	res, err := f.Store.RecordFeedback(ctx, store.Feedback{
		ID: p.ID, SubscriberID: p.SubscriberID, Email: p.Email, Type: typ,
		Digest: p.Kind == "" || p.Kind == mailer.KindDigest, Issue: p.IssueID,
	}, f.Policy)
	log := f.log().With("source", p.Source, "type", p.Type, "domain", address.Domain(p.Email))
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Not on the list (any more), or a tag and an address that do
		// not agree: nothing to change, and nothing to retry.
		log.Info("feedback about an address not on the list", "subscriber", p.SubscriberID)
		if f.Metrics != nil {
			f.Metrics.FeedbackUnmatched.WithLabelValues(p.Source).Inc()
		}
		return nil
	case err != nil:
		return fmt.Errorf("record feedback: %w", err)
	case res.Duplicate:
		log.Info("feedback report seen before: ignored", "report", p.ID)
		return nil
	}
	if f.Metrics != nil {
		if typ == store.Complaint {
			f.Metrics.Complaints.WithLabelValues(p.Source).Inc()
		} else {
			f.Metrics.Bounces.WithLabelValues(p.Type, p.Source).Inc()
		}
	}
	if res.Changed {
		typ := webhook.SubscriberBounced
		if res.Subscriber.Status == store.Complained {
			typ = webhook.SubscriberComplained
		}
		f.Notify.NotifyLogged(ctx, webhook.Subscriber(typ, res.Subscriber, p.Source))
	}
	log.Info("feedback recorded", "subscriber", res.Subscriber.ID, "status", res.Subscriber.Status,
		"changed", res.Changed, "soft_bounces", res.SoftBounces, "kind", p.Kind, "issue", p.IssueID, "reason", p.Reason)
	return nil
}

func (f *FeedbackRecorder) log() *slog.Logger {
	if f.Log != nil {
		return f.Log
	}
	return slog.Default()
}
