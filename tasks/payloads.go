package tasks

import "time"

// ConfirmPayload is the payload of TypeConfirmEmail.
type ConfirmPayload struct {
	Email string `json:"email"`
	// Nonce names this request, so a repeated run of the same task sends
	// once while a later request for a lost mail sends again.
	Nonce string `json:"nonce"`
}

// UnsubscribeLinkPayload is the payload of TypeUnsubscribeEmail.
type UnsubscribeLinkPayload struct {
	Email string `json:"email"`
	Nonce string `json:"nonce"` // one mail per request, as ConfirmPayload
}

// PreferencesLinkPayload is the payload of TypePreferencesEmail.
type PreferencesLinkPayload struct {
	Email string `json:"email"`
	Nonce string `json:"nonce"` // one mail per request, as ConfirmPayload
}

// WelcomePayload is the payload of TypeWelcomeEmail: the sequence's first
// step, whichever template that is when it runs.
type WelcomePayload struct {
	Email string `json:"email"`
}

// StepPayload is the payload of TypeSequenceStep: the step that was next
// for Email when it was scheduled. The handler sends it only if it is
// still next (steps may have been added or removed since).
type StepPayload struct {
	Email string `json:"email"`
	Step  string `json:"step"` // the step's template
}

// FeedsPollPayload is the payload of TypeFeedsPoll: the start of the poll
// slot it belongs to (NEWSLETTER_FEEDS_INTERVAL wide).
type FeedsPollPayload struct {
	Slot time.Time `json:"slot"`
}

// DigestPlanPayload is the payload of TypeDigestPlan.
type DigestPlanPayload struct {
	Period string `json:"period"`
}

// EventPayload is the payload of TypeEvent: one notification for one
// subscriber.
type EventPayload struct {
	ID string `json:"id"`
	// SubscriberID is the person (an address in a task would outlive
	// their erasure); Email is the older shape, read while it drains.
	SubscriberID int64     `json:"subscriber_id,omitempty"`
	Email        string    `json:"email,omitempty"`
	Title        string    `json:"title"`
	URL          string    `json:"url"`
	At           time.Time `json:"at"`
	// Topic is a topic event's, mailed in the person's bundle because it
	// was not read in the inbox (IfUnread); empty: updates.
	Topic string `json:"topic,omitempty"`
}

// EventsPayload is the payload of TypeEventsEmail: one subscriber's bundle.
type EventsPayload struct {
	// SubscriberID is the person; Email the older shape (see EventPayload).
	SubscriberID int64          `json:"subscriber_id,omitempty"`
	Email        string         `json:"email,omitempty"`
	Events       []EventPayload `json:"events"`
}

// FeedbackPayload is the payload of TypeFeedback: one report about one
// address, from one source.
type FeedbackPayload struct {
	// ID is the report's own id (deduplicated by the store and, while
	// the task exists, by its TaskID).
	ID           string `json:"id,omitempty"`
	SubscriberID int64  `json:"subscriber_id,omitempty"` // from the VERP tag or Message-ID
	Email        string `json:"email,omitempty"`
	// Type is hard, soft or complaint (store.FeedbackType).
	Type string `json:"type"`
	// Source is where the report came from: FeedbackSources.
	Source string `json:"source"`
	// Kind is the kind of the mail it is about, when known.
	Kind string `json:"kind,omitempty"`
	// IssueID is the issue the mail was, when its tag names one.
	IssueID int64  `json:"issue_id,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// ImportRunPayload is the payload of TypeImportRun: the job's id
// (csvimport.Jobs).
type ImportRunPayload struct {
	ID string `json:"id"`
}

// AccountInvitePayload is the payload of TypeAccountInvite: the invite
// link (its token is kept nowhere else but in this task until the mail is
// sent: the store has only its hash), for whom, by whom, until when.
type AccountInvitePayload struct {
	Hash    string    `json:"hash"` // the token's hash: the task's id
	Email   string    `json:"email"`
	Role    string    `json:"role"`
	By      string    `json:"by"`
	Link    string    `json:"link"`
	Expires time.Time `json:"expires"`
}

// ListJobPayload is the payload of TypeSubscribersBulk and TypeExportRun:
// the job's id (listjobs.Jobs).
type ListJobPayload struct {
	ID string `json:"id"`
}
