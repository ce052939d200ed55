package worker

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/tasks"
)

// route is one task type's handler.
type route struct {
	typ     string
	handler asynq.Handler
}

// on binds kind k to fn, a handler of its decoded payload. The payload is
// read and checked first (tasks.Kind.Decode); one that fails is dropped
// without a retry (SkipRetry): running it again cannot make it readable.
func on[P any](k tasks.Kind[P], fn func(context.Context, P) error) route {
	return route{typ: k.Type, handler: asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		p, err := k.Decode(t.Payload())
		if err != nil {
			return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
		}
		return fn(ctx, p)
	})}
}

// routes is every task type this worker runs, one line per component:
// the one registration a new task type adds. A component this worker has
// not (web push without VAPID keys, no imports) runs none; each route
// runs in the lane of its kind's queue.
func (h Handlers) routes() []route {
	var rs []route
	add := func(present bool, r ...route) {
		if present {
			rs = append(rs, r...)
		}
	}
	add(h.Mails != nil, on(tasks.ConfirmEmail, h.Mails.HandleConfirm), on(tasks.UnsubscribeEmail, h.Mails.HandleUnsubscribeLink),
		on(tasks.PreferencesEmail, h.Mails.HandlePreferencesLink))
	add(h.Sequence != nil, on(tasks.WelcomeEmail, h.Sequence.HandleWelcome), on(tasks.SequenceStep, h.Sequence.HandleStep))
	add(h.Planner != nil, on(tasks.DigestPlan, h.Planner.HandleDigestPlan))
	add(h.Events != nil, on(tasks.EventsEmail, h.Events.HandleEventsEmail))
	add(h.Feedback != nil, on(tasks.Feedback, h.Feedback.HandleFeedback))
	add(h.Issues != nil, on(tasks.IssuePlan, h.Issues.HandleIssuePlan), on(tasks.IssueEmail, h.Issues.HandleIssueBatch))
	add(h.Feeds != nil, on(tasks.FeedsPoll, h.Feeds.HandleFeedsPoll))
	add(h.Fanout != nil, on(tasks.Fanout, h.Fanout.HandleFanout), on(tasks.EventMail, h.Fanout.HandleEventMail),
		on(tasks.IfUnread, h.Fanout.HandleIfUnread))
	add(h.Webhooks != nil, on(tasks.Webhook, h.Webhooks.HandleWebhook))
	add(h.Push != nil, on(tasks.Push, h.Push.HandlePush))
	add(h.SMS != nil, on(tasks.SMS, h.SMS.HandleSMS), on(tasks.SMSCode, h.SMS.HandleSMSCode))
	for _, name := range slices.Sorted(maps.Keys(h.Channels)) {
		if k, ok := tasks.DeliverKind(name); ok {
			add(true, on(k, h.Channels[name].Handle))
		}
	}
	add(h.Imports != nil, on(tasks.ImportRun, h.Imports.HandleImportRun))
	add(h.Invites != nil, on(tasks.AccountInvite, h.Invites.HandleInvite))
	add(h.ListJobs != nil, on(tasks.SubscribersBulk, h.ListJobs.HandleListJob), on(tasks.ExportRun, h.ListJobs.HandleListJob))
	return rs
}

// lane is the handlers of the routes that run in lane.
func (h Handlers) lane(lane string) map[string]asynq.Handler {
	m := map[string]asynq.Handler{}
	for _, r := range h.routes() {
		if tasks.LaneOf(tasks.QueueOf(r.typ)) == lane {
			m[r.typ] = r.handler
		}
	}
	return m
}
