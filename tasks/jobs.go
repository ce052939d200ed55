package tasks

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/newsletter/newsletter/internal/topics"
)

// Every task's queue, TaskID and options are set here and nowhere else: the
// API, the relay, the planner and the tests enqueue these definitions.

// Job is a task with its deterministic id and due time: what goes into the
// outbox and then into the queue.
type Job struct {
	Task *asynq.Task
	ID   string
	Due  time.Time
}

// Options are the enqueue options that place the job at its due time.
func (j Job) Options() []asynq.Option { return []asynq.Option{asynq.ProcessAt(j.Due)} }

// ConfirmTaskID is the id under which email's confirmation waits: a
// pending one is not queued twice.
func ConfirmTaskID(email string) string { return "confirm:" + email }

// WelcomeTaskID is the id under which email's welcome waits.
func WelcomeTaskID(email string) string { return "welcome:" + email }

// NewConfirm is the confirmation mail for email, due now.
func NewConfirm(email string, now time.Time) Job {
	return ConfirmEmail.Job(ConfirmPayload{Email: email, Nonce: newNonce()}, now)
}

// NewWelcome is the sequence's first step (the welcome) for email, due
// after delay.
func NewWelcome(email string, now time.Time, delay time.Duration) Job {
	return NewWelcomeAt(email, now.Add(delay))
}

// NewWelcomeAt is the sequence's first step for email, due at due.
func NewWelcomeAt(email string, due time.Time) Job {
	return WelcomeEmail.Job(WelcomePayload{Email: email}, due)
}

// StepTaskID is the id under which email's step (by template) waits: each
// step schedules the next under its own id, so at most one step per person
// is pending, and leaving can name every one of them.
func StepTaskID(email, template string) string { return "step:" + email + ":" + template }

// NewStep is the later step template of the sequence for email, due at
// due (now when that is past).
func NewStep(email, template string, due time.Time) Job {
	return SequenceStep.Job(StepPayload{Email: email, Step: template}, due)
}

// SequenceTasks are the tasks that may hold email's pending step of seq:
// the first step (the welcome task) and each later one.
func SequenceTasks(email string, seq topics.Sequence) []TaskRef {
	refs := []TaskRef{{Queue: WelcomeEmail.Queue, ID: WelcomeTaskID(email)}}
	for _, st := range seq.Steps[min(1, len(seq.Steps)):] {
		refs = append(refs, TaskRef{Queue: SequenceStep.Queue, ID: StepTaskID(email, st.Template)})
	}
	return refs
}

// SequenceCancel is what the store drops with the sequence's topic: the
// outbox entries of email's steps.
func SequenceCancel(email string, seq topics.Sequence) outbox.Cancel {
	c := outbox.Cancel{Topic: seq.Topic}
	for _, r := range SequenceTasks(email, seq) {
		c.Outbox = append(c.Outbox, r.ID)
	}
	return c
}

// UnsubscribeLinkTaskID is the id under which email's unsubscribe link
// waits: a request while one is queued adds nothing.
func UnsubscribeLinkTaskID(email string) string { return "unsubscribe:" + email }

// NewUnsubscribeLink mails email a one-click unsubscribe link. It has no
// outbox entry: nothing changes in the store, and a lost one is asked for
// again by the person.
func NewUnsubscribeLink(email string) *asynq.Task {
	return UnsubscribeEmail.New(UnsubscribeLinkPayload{Email: email, Nonce: newNonce()})
}

// PreferencesLinkTaskID is the id under which email's fresh preferences
// link waits: a request while one is queued adds nothing.
func PreferencesLinkTaskID(email string) string { return "preferences:" + email }

// NewPreferencesLink mails email a fresh preferences link. Like
// NewUnsubscribeLink it has no outbox entry: nothing changes in the
// store, and a lost one is asked for again.
func NewPreferencesLink(email string) *asynq.Task {
	return PreferencesEmail.New(PreferencesLinkPayload{Email: email, Nonce: newNonce()})
}

// FeedbackSources are the places a bounce or complaint report comes from,
// the values of the metrics' source label.
var FeedbackSources = []string{"smtp", "ses", "sendgrid", "mailgun", "postmark", "api"}

// FeedbackTaskID is the id of the task of report id: the same report
// delivered twice while the first is queued adds nothing.
func FeedbackTaskID(id string) string { return "feedback:" + id }

// NewFeedback is the task that applies one report. It refuses a report
// that names no address, an unknown type or source.
func NewFeedback(p FeedbackPayload) (*asynq.Task, error) {
	switch p.Type {
	case "hard", "soft", "complaint":
	default:
		return nil, fmt.Errorf("feedback type %q: want hard, soft or complaint", p.Type)
	}
	if !slices.Contains(FeedbackSources, p.Source) {
		return nil, fmt.Errorf("feedback source %q unknown", p.Source)
	}
	if p.Email == "" && p.SubscriberID <= 0 {
		return nil, errors.New("feedback names no address")
	}
	return Feedback.New(p), nil
}

// TaskRef names one task in one queue, for the Inspector.
type TaskRef struct{ Queue, ID string }

// PendingMails are the tasks that may still mail email after the person
// left: the confirmation and the sequence's steps. Unsubscribing drops
// their outbox entries and deletes them from the queue; the handlers'
// re-check covers a task that is already running.
func PendingMails(email string, seq topics.Sequence) []TaskRef {
	return append([]TaskRef{{Queue: ConfirmEmail.Queue, ID: ConfirmTaskID(email)}}, SequenceTasks(email, seq)...)
}

// PersonTasks are the tasks named after email that may hold their
// address: PendingMails and the unsubscribe and preferences links mailed
// on request. An erasure deletes them.
func PersonTasks(email string, seq topics.Sequence) []TaskRef {
	return append(PendingMails(email, seq), TaskRef{Queue: UnsubscribeEmail.Queue, ID: UnsubscribeLinkTaskID(email)},
		TaskRef{Queue: PreferencesEmail.Queue, ID: PreferencesLinkTaskID(email)})
}

// DigestPlanTaskID is the id of a period's plan task: every scheduler
// replica and every manual run of the period meet on it.
func DigestPlanTaskID(period string) string { return "digest:" + period }

// NewDigestPlan is the planning task of period (DigestPlan).
func NewDigestPlan(period string) *asynq.Task {
	return DigestPlan.New(DigestPlanPayload{Period: period})
}

// NewEventsEmail is one subscriber's bundle as one mail. The aggregator
// makes it; asynq drops any option given to the events, so the kind's
// are its only options.
func NewEventsEmail(bundle EventsPayload) *asynq.Task {
	return EventsEmail.New(bundle)
}

// ImportRunTaskID is the id of the task of import job id: the job is run
// by one task at a time.
func ImportRunTaskID(id string) string { return "import:" + id }

// NewImportRun is the task that reads the uploaded import job id
// (ImportRun).
func NewImportRun(id string) *asynq.Task {
	return ImportRun.New(ImportRunPayload{ID: id})
}

// mustJSON encodes a payload struct of this package; they have no field
// that can fail to encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("tasks: encode %T: %v", v, err))
	}
	return b
}

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
