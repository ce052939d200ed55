package feedback

import "context"

// Event is one report about one address, from one source, as this
// package read and verified it: a bounce or a complaint. Its fields are
// those of tasks.FeedbackPayload, field for field, so the side that
// queues it converts it as is (tasks.FeedbackPayload(ev)); this package
// imports nothing of the tasks, which would make a channel depend on the
// worker's vocabulary.
type Event struct {
	// ID is the report's own id (the store and the task's id deduplicate
	// by it); "" when the source gives none.
	ID           string
	SubscriberID int64 // from the VERP tag or Message-ID
	Email        string
	// Type is hard, soft or complaint (store.FeedbackType).
	Type string
	// Source is where the report came from: smtp, ses, sendgrid,
	// mailgun, postmark, api.
	Source string
	// Kind is the kind of the mail it is about, when known.
	Kind string
	// IssueID is the issue the mail was, when its tag names one.
	IssueID int64
	Reason  string
}

// Consumer takes the events the bounce intake read (intake.Config). The
// process supplies it: the one that runs the intake queues a feedback
// task for each. An error means the event was not taken and the report
// must come again (the intake answers 451); an event taken before (the
// same ID) is no error.
type Consumer interface {
	Consume(ctx context.Context, ev Event) error
}
