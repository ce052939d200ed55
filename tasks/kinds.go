package tasks

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The kinds: every task type with its payload, queue, retries, time budget
// and TaskID. Constructors (jobs.go, issues.go, fanout.go, ...) build their
// tasks from these, and the worker registers a handler per kind.

// ConfirmEmail is the confirmation mail: a person waits for it with the
// signup page open, so it has the queue with the highest weight.
var ConfirmEmail = define(Kind[ConfirmPayload]{
	Type: TypeConfirmEmail, Queue: QueueTransactional, MaxRetry: 10, Timeout: time.Minute,
	ID:    func(p ConfirmPayload) string { return ConfirmTaskID(p.Email) },
	Check: func(p ConfirmPayload) error { return need(p.Email != "" && p.Nonce != "", "email or nonce") },
})

// WelcomeEmail is the onboarding sequence's first step.
var WelcomeEmail = define(Kind[WelcomePayload]{
	Type: TypeWelcomeEmail, Queue: QueueDefault, MaxRetry: 5, Timeout: 2 * time.Minute,
	ID:    func(p WelcomePayload) string { return WelcomeTaskID(p.Email) },
	Check: func(p WelcomePayload) error { return need(p.Email != "", "email") },
})

// SequenceStep is each later step of the onboarding sequence.
var SequenceStep = define(Kind[StepPayload]{
	Type: TypeSequenceStep, Queue: QueueDefault, MaxRetry: 5, Timeout: 2 * time.Minute,
	ID:    func(p StepPayload) string { return StepTaskID(p.Email, p.Step) },
	Check: func(p StepPayload) error { return need(p.Email != "" && p.Step != "", "email and step") },
})

// UnsubscribeEmail mails a one-click unsubscribe link on request: a
// person waits for it with the page open, like a confirmation.
var UnsubscribeEmail = define(Kind[UnsubscribeLinkPayload]{
	Type: TypeUnsubscribeEmail, Queue: QueueTransactional, MaxRetry: 10, Timeout: time.Minute,
	ID:    func(p UnsubscribeLinkPayload) string { return UnsubscribeLinkTaskID(p.Email) },
	Check: func(p UnsubscribeLinkPayload) error { return need(p.Email != "" && p.Nonce != "", "email or nonce") },
})

// PreferencesEmail mails a fresh preferences link on request (the page
// of an expired one): a person waits for it, like a confirmation.
var PreferencesEmail = define(Kind[PreferencesLinkPayload]{
	Type: TypePreferencesEmail, Queue: QueueTransactional, MaxRetry: 10, Timeout: time.Minute,
	ID:    func(p PreferencesLinkPayload) string { return PreferencesLinkTaskID(p.Email) },
	Check: func(p PreferencesLinkPayload) error { return need(p.Email != "" && p.Nonce != "", "email or nonce") },
})

// Feedback applies one bounce or complaint report, ahead of the bulk: a
// report stops mail that would hurt the sender. A report without an id of
// its own gets asynq's.
var Feedback = define(Kind[FeedbackPayload]{
	Type: TypeFeedback, Queue: QueueCritical, MaxRetry: 20, Timeout: 30 * time.Second,
	ID: func(p FeedbackPayload) string {
		if p.ID == "" {
			return ""
		}
		return FeedbackTaskID(p.ID)
	},
})

// DigestPlan plans a period's digest. It runs as long as the sending
// takes (it waits for room in the queue) and saves its cursor after every
// page, so its timeout is long and a retry resumes.
var DigestPlan = define(Kind[DigestPlanPayload]{
	Type: TypeDigestPlan, Queue: QueueCritical, MaxRetry: 25, Timeout: 30 * time.Minute,
	ID:    func(p DigestPlanPayload) string { return DigestPlanTaskID(p.Period) },
	Check: func(p DigestPlanPayload) error { return need(ValidPeriod(p.Period), "valid period") },
})

// Event is one notification for one person, grouped so the aggregator
// bundles a person's events into one EventsEmail.
var Event = define(Kind[EventPayload]{Type: TypeEvent, Queue: QueueDefault, Grouped: true})

// IfUnread is an event's e-mail to one reader, held until they had the
// time to read it in the inbox: kept a day once done, so the same event
// fanned out again within the day finds its id taken.
var IfUnread = define(Kind[IfUnreadPayload]{
	Type: TypeIfUnread, Queue: QueueDefault, MaxRetry: 25, Timeout: time.Minute, Retention: 24 * time.Hour,
	ID: func(p IfUnreadPayload) string {
		return "if_unread:" + p.Key + ":" + strconv.FormatInt(p.SubscriberID, 10)
	},
	Check: func(p IfUnreadPayload) error {
		return need(p.Channel != "" && p.Key != "" && p.ID != "" && p.SubscriberID > 0, "channel, key, event id and subscriber")
	},
})

// EventsEmail is one person's bundle of events as one mail. The
// aggregator makes it and asynq puts it in its group's queue (the events'
// queue, which is this one).
var EventsEmail = define(Kind[EventsPayload]{
	Type: TypeEventsEmail, Queue: QueueDefault, MaxRetry: 10, Timeout: 2 * time.Minute,
	Check: func(p EventsPayload) error {
		return need((p.SubscriberID > 0 || p.Email != "") && len(p.Events) > 0, "subscriber and events")
	},
})

// IssuePlan plans a round of a publisher's issue: bulk mail, as the
// digest is, and as long-running as the digest's plan.
var IssuePlan = define(Kind[IssuePlanPayload]{
	Type: TypeIssuePlan, Queue: QueueCritical, MaxRetry: 25, Timeout: 30 * time.Minute,
	ID:    func(p IssuePlanPayload) string { return IssuePlanTaskID(p.IssueID, p.Round) },
	Check: func(p IssuePlanPayload) error { return need(p.IssueID > 0, "issue id") },
})

// IssueEmail is a batch of an issue's readers.
var IssueEmail = define(Kind[IssueBatchPayload]{
	Type: TypeIssueEmail, Queue: QueueCritical, MaxRetry: 20, Timeout: 10 * time.Minute,
	ID: func(p IssueBatchPayload) string { return IssueBatchTaskID(p.IssueID, p.Round, p.IDs[0]) },
	Check: func(p IssueBatchPayload) error {
		return need(p.IssueID > 0 && len(p.IDs) > 0, "issue and recipients")
	},
})

// FeedsPoll fetches the topics file's feeds once per slot, behind the
// mail: a poll a few minutes late changes nothing. Its time budget and
// retention follow the poll interval (NewFeedsPoll).
var FeedsPoll = define(Kind[FeedsPollPayload]{
	Type: TypeFeedsPoll, Queue: QueueDefault, MaxRetry: 2,
	ID: func(p FeedsPollPayload) string { return FeedsPollTaskID(p.Slot) },
})

// Webhook delivers one event to one endpoint. It is retried for a day
// (DefaultWebhookBackoff; the handler ends it at the window, MaxRetry is
// only asynq's ceiling) and kept that long once done, so the same event
// reported again within the day finds its id taken and is not sent twice.
var Webhook = define(Kind[WebhookPayload]{
	Type: TypeWebhook, Queue: QueueWebhook,
	MaxRetry: DefaultWebhookBackoff.MaxRetry(), Timeout: webhookTimeout, Retention: DefaultWebhookBackoff.Window,
	ID:    func(p WebhookPayload) string { return WebhookTaskID(p.Endpoint, p.ID) },
	Check: func(p WebhookPayload) error { return need(p.Endpoint != "" && p.ID != "", "endpoint and event id") },
})

// Fanout is the one ingress task of an event or of an issue's
// notifications. It runs in the e-mail lane, beside the events it
// replaces: it only reads and enqueues, and never waits on a channel's
// provider, so a hung push service cannot hold it. It is kept a day once
// done, so the same event id handed in again within the day is a
// conflict, not a second fan-out.
var Fanout = define(Kind[FanoutPayload]{
	Type: TypeFanout, Queue: QueueDefault, MaxRetry: 25, Timeout: 30 * time.Minute, Retention: 24 * time.Hour,
	ID: FanoutTaskID,
	Check: func(p FanoutPayload) error {
		if p.IssueID > 0 {
			return nil
		}
		if p.ID == "" || p.Title == "" {
			return need(false, "event id and title")
		}
		return need(p.SubscriberID > 0 || p.Email != "" || p.Topic != "", "email, topic or issue")
	},
})

// EventMail mails a topic's event to a batch of its readers.
var EventMail = define(Kind[EventMailPayload]{
	Type: TypeEventMail, Queue: QueueDefault, MaxRetry: 20, Timeout: 10 * time.Minute,
	ID: func(p EventMailPayload) string { return fmt.Sprintf("event:%s:%d", p.ID, p.IDs[0]) },
	Check: func(p EventMailPayload) error {
		return need(p.ID != "" && p.Topic != "" && len(p.IDs) > 0, "event, topic and recipients")
	},
})

// Push notifies one person's browsers, in the push lane. A push service
// that keeps failing is retried with the lane's backoff for about a day
// (MaxRetry 20 on a backoff doubling to an hour); after that the task is a
// dead letter in the push queue's archive.
var Push = define(Kind[PushPayload]{
	Type: TypePush, Queue: QueuePush, MaxRetry: 20, Timeout: pushTimeout,
	ID: func(p PushPayload) string { return PushTaskID(p.Key, p.SubscriberID) },
	Check: func(p PushPayload) error {
		return need(p.Key != "" && p.SubscriberID > 0 && p.Title != "", "key, subscriber and title")
	},
})

// SMS texts one person's number, in the sms lane. A gateway that keeps
// failing is retried on the lane's backoff for about a day, as push is;
// quiet hours and the daily caps defer it (not counted as failures).
var SMS = define(Kind[SMSPayload]{
	Type: TypeSMS, Queue: QueueSMS, MaxRetry: 20, Timeout: pushTimeout,
	ID: func(p SMSPayload) string { return SMSTaskID(p.Key, p.SubscriberID) },
	Check: func(p SMSPayload) error {
		return need(p.Key != "" && p.SubscriberID > 0 && p.Text != "", "key, subscriber and text")
	},
})

// SMSCode texts a number's proof code, in the sms lane: retried only
// until the code ends.
var SMSCode = define(Kind[SMSCodePayload]{
	Type: TypeSMSCode, Queue: QueueSMS, MaxRetry: 5, Timeout: pushTimeout,
	ID: func(p SMSCodePayload) string {
		return fmt.Sprintf("smscode:%d:%d", p.SubscriberID, p.Until.UnixMilli())
	},
	Check: func(p SMSCodePayload) error {
		return need(p.SubscriberID > 0 && p.Number != "" && p.Code != "" && p.Text != "" && !p.Until.IsZero(), "subscriber, number, code, text and end")
	},
})

// ImportRun reads one uploaded CSV into the list: bulk writes nobody
// waits for by the second, so behind the mail. It saves a checkpoint after
// every batch, so a retry (or a worker that takes it over after a
// restart) resumes; a large file takes minutes.
var ImportRun = define(Kind[ImportRunPayload]{
	Type: TypeImportRun, Queue: QueueLow, MaxRetry: 25, Timeout: 30 * time.Minute,
	ID:    func(p ImportRunPayload) string { return ImportRunTaskID(p.ID) },
	Check: func(p ImportRunPayload) error { return need(p.ID != "", "job id") },
})

// AccountInvite mails an invite to the console: a person may be waiting
// for it, like a confirmation. It is not kept once sent (its link is a
// secret); its retries end before the link would.
var AccountInvite = define(Kind[AccountInvitePayload]{
	Type: TypeAccountInvite, Queue: QueueTransactional, MaxRetry: 10, Timeout: time.Minute,
	ID: func(p AccountInvitePayload) string { return "invite:" + p.Hash },
	Check: func(p AccountInvitePayload) error {
		return need(p.Hash != "" && p.Email != "" && p.Link != "" && !p.Expires.IsZero(), "hash, email, link and expiry")
	},
})

// SubscribersBulk applies a bulk action to a selection of the list
// (listjobs): behind the mail, as imports; it saves its cursor after each
// page, so a retry resumes (every action is safe to apply twice).
var SubscribersBulk = define(Kind[ListJobPayload]{
	Type: TypeSubscribersBulk, Queue: QueueLow, MaxRetry: 25, Timeout: 30 * time.Minute,
	ID:    func(p ListJobPayload) string { return "bulk:" + p.ID },
	Check: func(p ListJobPayload) error { return need(p.ID != "", "job id") },
})

// ExportRun writes a selection of the list as CSV (listjobs): each chunk
// and the cursor after it are saved together, so a retry resumes.
var ExportRun = define(Kind[ListJobPayload]{
	Type: TypeExportRun, Queue: QueueLow, MaxRetry: 25, Timeout: 30 * time.Minute,
	ID:    func(p ListJobPayload) string { return "export:" + p.ID },
	Check: func(p ListJobPayload) error { return need(p.ID != "", "job id") },
})

// need is a Check's answer: nil when ok, else that the payload lacks what.
func need(ok bool, what string) error {
	if ok {
		return nil
	}
	return errors.New("has no " + what)
}
