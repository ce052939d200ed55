package tasks

// Task types. Producers and the worker meet on these names; asynqmon shows
// them.
const (
	TypeConfirmEmail = "email:confirm"
	// TypeWelcomeEmail is the first step of the onboarding sequence (the
	// welcome, unless the topics file says otherwise); TypeSequenceStep
	// each later one. One handler sends both.
	TypeWelcomeEmail = "email:welcome"
	TypeSequenceStep = "email:step"
	TypeDigestPlan   = "digest:plan"
	TypeEvent        = "event:notify"
	TypeEventsEmail  = "email:events"
	// TypeUnsubscribeEmail mails a one-click unsubscribe link to an
	// address that asked to leave without a token
	// (NEWSLETTER_UNSUBSCRIBE_BY_EMAIL=confirm).
	TypeUnsubscribeEmail = "email:unsubscribe"
	// TypePreferencesEmail mails a fresh preferences link to the address
	// an expired one named.
	TypePreferencesEmail = "email:preferences"
	// TypeFeedback applies one bounce or complaint report (the bounce
	// intake, a provider's webhook) to its subscriber.
	TypeFeedback = "feedback:record"
	// TypeIssuePlan walks an issue's audience as TypeDigestPlan does;
	// TypeIssueEmail sends it to a batch (issues.go).
	TypeIssuePlan  = "issue:plan"
	TypeIssueEmail = "email:issue"
	// TypeFeedsPoll fetches every feed of the topics file once and turns
	// new entries into their topics' items (RSS-to-email).
	TypeFeedsPoll = "feeds:poll"
	// TypeWebhook delivers one event to one outgoing webhook endpoint.
	TypeWebhook = "webhook:deliver"
	// TypeFanout is the one ingress task of an event or of an issue's
	// notifications: it enqueues one task per person and channel in that
	// channel's lane (fanout.go). TypeEventMail mails a topic's event to
	// a batch of its readers; TypePush notifies one person's browsers.
	TypeFanout    = "event:fanout"
	TypeEventMail = "email:event"
	// TypeIfUnread checks, when an event's "email_if_unread_after" is up,
	// whether one reader read it in a channel that tracks reads (the
	// inbox), and queues its e-mail (into the person's bundle) if not.
	TypeIfUnread = "event:if_unread"
	TypePush     = "push:deliver"
	// TypeSMS texts one person's number, in the sms lane; TypeSMSCode
	// texts the code that proves a number a person gave.
	TypeSMS     = "sms:deliver"
	TypeSMSCode = "sms:code"
	// TypeImportRun reads one CSV uploaded through the console
	// (csvimport.Jobs) into the list, saving a checkpoint after each
	// batch, so a run taken over after a restart goes on from there.
	TypeImportRun = "import:run"
	// TypeAccountInvite mails a colleague the link that makes them an
	// account of the console (internal/account).
	TypeAccountInvite = "email:invite"
	// TypeSubscribersBulk applies one bulk action (listjobs) to a
	// filtered selection of the list, page by page, saving its cursor;
	// TypeExportRun writes a filtered selection as CSV into Redis chunks.
	TypeSubscribersBulk = "subscribers:bulk"
	TypeExportRun       = "export:run"
)

// The e-mail lane's queues (lanes.go has the others). A confirmation is
// what a person waits for with the signup page open, so it has its own
// queue with the highest weight: a million-recipient digest in the
// critical queue never holds it for more than seconds. low is for bulk
// that may wait behind everything else.
const (
	QueueTransactional = "transactional"
	QueueCritical      = "critical"
	QueueDefault       = "default"
)

// QueueWeights is the e-mail lane's asynq Queues map.
var QueueWeights = map[string]int{QueueTransactional: 10, QueueCritical: 6, QueueDefault: 3, QueueLow: 1}

// Queues lists every queue of every lane, for those who watch or scale on
// all of them: the e-mail lane's by weight, then push and webhook.
var Queues = []string{QueueTransactional, QueueCritical, QueueDefault, QueueLow, QueuePush, QueueWebhook, QueueSMS}
