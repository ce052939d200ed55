package worker

import (
	"context"
	"errors"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

func feedbackTask(t *testing.T, p tasks.FeedbackPayload) *asynq.Task {
	t.Helper()
	task, err := tasks.NewFeedback(p)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// TestFeedbackSuppressesAndCountsOnce: a complaint stops every later mail
// (the welcome's re-check skips), is counted once however often it is
// delivered; a report about a stranger is counted as unmatched and changes
// nothing.
func TestFeedbackSuppressesAndCountsOnce(t *testing.T) {
	h, st, rec := newHandlers(t)
	ctx := context.Background()
	sub := activate(t, st, "ann@example.com")
	complaint := tasks.FeedbackPayload{ID: "arf-1", SubscriberID: sub.ID, Email: sub.Email, Type: "complaint", Source: "smtp", Kind: mailer.KindDigest}
	for range 2 {
		if err := runTask(ctx, tasks.Feedback, h.Feedback.HandleFeedback, feedbackTask(t, complaint)); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := st.Get(ctx, sub.Email); got.Status != store.Complained {
		t.Fatalf("after a complaint: %s", got.Status)
	}
	if n := testutil.ToFloat64(h.Metrics.Complaints.WithLabelValues("smtp")); n != 1 {
		t.Fatalf("one complaint delivered twice counted %v times", n)
	}
	if err := runTask(ctx, tasks.WelcomeEmail, h.Sequence.HandleWelcome, tasks.NewWelcome(sub.Email, sub.CreatedAt, 0).Task); err != nil || rec.count() != 0 {
		t.Fatalf("a welcome after the complaint: %v, %d mails", err, rec.count())
	}

	stranger := tasks.FeedbackPayload{ID: "dsn-9", Email: "who@example.com", Type: "hard", Source: "ses"}
	if err := runTask(ctx, tasks.Feedback, h.Feedback.HandleFeedback, feedbackTask(t, stranger)); err != nil {
		t.Fatalf("a report about a stranger must not retry: %v", err)
	}
	if n := testutil.ToFloat64(h.Metrics.FeedbackUnmatched.WithLabelValues("ses")); n != 1 {
		t.Fatalf("unmatched: %v", n)
	}
	if n := testutil.ToFloat64(h.Metrics.Bounces.WithLabelValues("hard", "ses")); n != 0 {
		t.Fatalf("a stranger's bounce was counted: %v", n)
	}
	if err := runTask(ctx, tasks.Feedback, h.Feedback.HandleFeedback, asynq.NewTask(tasks.TypeFeedback, []byte("{"))); !errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("unreadable payload: %v", err)
	}
	for _, bad := range []tasks.FeedbackPayload{
		{Email: "a@example.com", Type: "maybe", Source: "ses"},
		{Email: "a@example.com", Type: "hard", Source: "carrier-pigeon"},
		{Type: "hard", Source: "ses"},
	} {
		if _, err := tasks.NewFeedback(bad); err == nil {
			t.Fatalf("NewFeedback accepted %+v", bad)
		}
	}
}
