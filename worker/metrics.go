package worker

import (
	"errors"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/channels/sms"
	"github.com/newsletter/newsletter/internal/redisconn"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// Metrics are the worker's Prometheus metrics (docs/reference.md).
//
// Every label value known in advance (each kind, reason, task type and
// result) exists from start-up at 0: a counter series that appears only
// at its first event makes increase() read that event as 0, so an alert on
// "any rejection" would wait for the second one.
type Metrics struct {
	// Tasks and TaskDuration carry the lane of the task's queue: sum by
	// (lane) for a lane's view; every query that sums over the other
	// labels reads as before lanes.
	Tasks        *prometheus.CounterVec   // lane, type, queue, result
	TaskDuration *prometheus.HistogramVec // lane, type, queue
	Sent         *prometheus.CounterVec   // kind
	Failed       *prometheus.CounterVec   // kind, reason
	// Archived counts tasks that failed for good by cause: a bounce is
	// archived on purpose (the address is suppressed, nothing to do);
	// rejected, invalid and exhausted need an operator.
	Archived *prometheus.CounterVec // lane, type, queue, cause
	// Bounces and Complaints count the reports applied (a repeated report
	// counts once); FeedbackUnmatched those about an address not on the
	// list.
	Bounces           *prometheus.CounterVec // type (hard, soft), source
	Complaints        *prometheus.CounterVec // source
	FeedbackUnmatched *prometheus.CounterVec // source
	// Steps counts the onboarding sequence's step tasks by step (its
	// template) and outcome (StepOutcomes).
	Steps *prometheus.CounterVec // step, outcome
	// TransportPaused is 1 while a lane's transport refuses all mail
	// (SES's sending pause: the lane holds its mail), 0 once it accepts
	// mail again.
	TransportPaused *prometheus.GaugeVec // lane
	// FeedPolls counts the polls of the topics file's feeds by result
	// (FeedResults); FeedItems the entries that became items, FeedIssues
	// those (of feeds in mode each) that became issues of their own.
	FeedPolls  *prometheus.CounterVec // result
	FeedItems  prometheus.Counter
	FeedIssues prometheus.Counter
	// Notifications count the attempts of the notification lanes (web
	// push, webhooks) by lane and NotificationResults; WebhooksDisabled
	// the webhook endpoints disabled for failing (or 410 Gone).
	Notifications    *prometheus.CounterVec // lane, result
	WebhooksDisabled prometheus.Counter
	// AppNotifications count the push lane's notifications to app
	// installs by platform (fcm, apns) and NotificationResults: of
	// Notifications{lane="push"}, those that went to apps.
	AppNotifications *prometheus.CounterVec // platform, result
	// SMSCapReached counts texts held or dropped at a daily cap
	// (newsletter_sms_cap_reached_total, cap: per_number_day, per_day).
	SMSCapReached *prometheus.CounterVec // cap
	// IssueRenders counts issue bodies rendered from Markdown: once per
	// issue version in each worker process, however many readers it has.
	IssueRenders prometheus.Counter
}

// The lane labels: the e-mail transport's, and the webhooks'.
const (
	LaneEmail   = tasks.LaneEmail
	LaneWebhook = tasks.LaneWebhook
)

// NotificationResults are the values of the result label of
// newsletter_notifications_total: delivered, failed and retried later,
// given up (a dead letter in the lane's archive), or dropped because
// there is no longer anything to deliver to.
var NotificationResults = []string{"sent", "retry", "dead", "dropped"}

// Results are the values of the result label of newsletter_tasks_total.
var Results = []string{"success", "retry", "archived", "deferred"}

// ArchiveCauses are the values of the cause label of
// newsletter_tasks_archived_total: a mail class that never retries, or
// exhausted (every retry used).
var ArchiveCauses = []string{email.Bounced.String(), email.Rejected.String(), email.Invalid.String(), "exhausted"}

// NewMetrics registers the metrics on reg (nil: not registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_tasks_total", Help: "Tasks handled, by lane, type, queue and result (success, retry, archived, deferred).",
		}, []string{"lane", "type", "queue", "result"}),
		TaskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "newsletter_task_duration_seconds", Help: "Time a handler took, by lane, type and queue.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"lane", "type", "queue"}),
		Sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_emails_sent_total", Help: "Mails accepted by the mail server, by kind.",
		}, []string{"kind"}),
		Failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_emails_failed_total", Help: "Failed send attempts by kind and reason (temporary, throttled, bounced, rejected, invalid).",
		}, []string{"kind", "reason"}),
		Archived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_tasks_archived_total",
			Help: "Tasks archived (failed for good) by cause: bounced (expected: the address is suppressed), rejected, invalid, exhausted (every retry used).",
		}, []string{"lane", "type", "queue", "cause"}),
		Bounces: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_bounces_total", Help: "Bounce reports applied, by type (hard, soft) and source (smtp, ses, sendgrid, mailgun, postmark, api).",
		}, []string{"type", "source"}),
		Complaints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_complaints_total", Help: "Spam complaints applied, by source.",
		}, []string{"source"}),
		FeedbackUnmatched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_feedback_unmatched_total", Help: "Bounce and complaint reports about an address not on the list, by source.",
		}, []string{"source"}),
		Steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_sequence_steps_total", Help: "Onboarding sequence steps by step (template) and outcome (sent, left, superseded).",
		}, []string{"step", "outcome"}),
		TransportPaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "newsletter_transport_paused", Help: "1 while the lane's transport refuses all mail (Amazon SES paused sending) and the lane holds its mail; 0 once a mail goes out.",
		}, []string{"lane"}),
		FeedPolls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_feed_polls_total",
			Help: "Polls of the topics file's feeds by result (new, unchanged, not_modified, unreachable, too_large, invalid, store_error).",
		}, []string{"result"}),
		FeedItems: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "newsletter_feed_items_total", Help: "Feed entries that became items of their topic.",
		}),
		FeedIssues: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "newsletter_feed_issues_total", Help: "Entries of feeds in mode each that became issues of their own (sent as their day's cap allows).",
		}),
		Notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_notifications_total", Help: "Notification attempts by lane (push, webhook) and result (sent, retry, dead, dropped).",
		}, []string{"lane", "result"}),
		AppNotifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsletter_app_notifications_total", Help: "Push lane notifications to app installs by platform (fcm, apns) and result (sent, retry, dead, dropped).",
		}, []string{"platform", "result"}),
		WebhooksDisabled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "newsletter_webhook_endpoints_disabled_total", Help: "Webhook endpoints disabled because they kept failing or answered 410 Gone.",
		}),
		IssueRenders: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "newsletter_issue_renders_total", Help: "Issue bodies rendered from Markdown (once per issue version per worker process, not per reader).",
		}),
	}
	m.zeroSeries()
	m.SMSCapReached = sms.CapReachedMetric(reg)
	for _, c := range []string{store.SMSCapPerNumberDay, store.SMSCapPerDay} {
		m.SMSCapReached.WithLabelValues(c)
	}
	if reg != nil {
		reg.MustRegister(m.Tasks, m.TaskDuration, m.Sent, m.Failed, m.Archived, m.Bounces, m.Complaints, m.FeedbackUnmatched, m.Steps, m.TransportPaused,
			m.FeedPolls, m.FeedItems, m.FeedIssues, m.Notifications, m.AppNotifications, m.WebhooksDisabled, m.IssueRenders)
		// The worker's tasks are the commands the hold holds
		// (waitingOutRedis): its registry shows them.
		redisconn.RegisterMetrics(reg)
	}
	return m
}

// zeroSeries makes every series whose labels are known in advance exist
// at 0 (see Metrics).
func (m *Metrics) zeroSeries() {
	for _, r := range FeedResults {
		m.FeedPolls.WithLabelValues(r)
	}
	for _, r := range NotificationResults {
		m.Notifications.WithLabelValues(LaneWebhook, r)
		m.Notifications.WithLabelValues(LanePush, r)
		m.Notifications.WithLabelValues(LaneSMS, r)
		for _, p := range []string{store.PlatformFCM, store.PlatformAPNs} {
			m.AppNotifications.WithLabelValues(p, r)
		}
	}
	m.TransportPaused.WithLabelValues(LaneEmail)
	for _, src := range tasks.FeedbackSources {
		m.Bounces.WithLabelValues("hard", src)
		m.Bounces.WithLabelValues("soft", src)
		m.Complaints.WithLabelValues(src)
		m.FeedbackUnmatched.WithLabelValues(src)
	}
	for _, kind := range mailer.Kinds() {
		m.Sent.WithLabelValues(kind)
		for _, c := range email.Classes() {
			m.Failed.WithLabelValues(kind, c.String())
		}
	}
	for _, typ := range tasks.HandledTypes() {
		m.forType(typ)
	}
}

// forType makes the series of a task type exist at 0, in the queue and
// lane it runs in (a type with no queue in tasks has none made ahead).
func (m *Metrics) forType(typ string) {
	q := tasks.QueueOf(typ)
	if m == nil || q == "" {
		return
	}
	lane := tasks.LaneOf(q)
	m.TaskDuration.WithLabelValues(lane, typ, q)
	for _, r := range Results {
		m.Tasks.WithLabelValues(lane, typ, q, r)
	}
	for _, c := range ArchiveCauses {
		m.Archived.WithLabelValues(lane, typ, q, c)
	}
}

// ForSteps makes the series of the sequence's steps exist at 0, as those
// of the other kinds do.
func (m *Metrics) ForSteps(templates []string) *Metrics {
	for _, t := range templates {
		m.Sent.WithLabelValues(t)
		for _, c := range email.Classes() {
			m.Failed.WithLabelValues(t, c.String())
		}
		for _, o := range StepOutcomes {
			m.Steps.WithLabelValues(t, o)
		}
	}
	return m
}

// archiveCause says why a task that will not run again failed.
func archiveCause(err error) string {
	if se := email.AsSendError(err); se != nil && errors.Is(err, asynq.SkipRetry) {
		switch se.Class {
		case email.Bounced, email.Rejected, email.Invalid:
			return se.Class.String()
		}
	}
	if errors.Is(err, ErrNotificationDead) {
		return "exhausted" // the endpoint failed for good: an operator's
	}
	if errors.Is(err, asynq.SkipRetry) {
		return email.Invalid.String() // an unreadable payload or a template error
	}
	return "exhausted"
}
