package store

import (
	"context"
	"errors"
	"time"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/outbox"
)

// Status is where a subscription stands.
type Status string

// The statuses a subscriber can have. Only Active subscribers get mail other
// than the confirmation.
const (
	Pending      Status = "pending"
	Active       Status = "active"
	Unsubscribed Status = "unsubscribed"
	Bounced      Status = "bounced"
	// Complained: the person reported our mail as spam. Never mailed
	// again; only their own fresh confirmation brings them back.
	Complained Status = "complained"
)

// Suppressed tells the statuses of the suppression list (bounced,
// complained): what the mail system said about the address. Only the
// person's own confirmation or an admin lifts them.
func (s Status) Suppressed() bool { return s == Bounced || s == Complained }

// Subscriber is one address on the list. Times are zero when the event has
// not happened.
type Subscriber struct {
	ID       int64  `json:"id"`
	Email    string `json:"email"`
	Name     string `json:"name,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// Topics are the ids of the topics the person gets, in the topics
	// file's order; an ended subscription has none.
	Topics         []string  `json:"topics"`
	Status         Status    `json:"status"`
	CreatedAt      time.Time `json:"created_at"`
	ConfirmedAt    time.Time `json:"confirmed_at,omitzero"`
	UnsubscribedAt time.Time `json:"unsubscribed_at,omitzero"`
	// Reconfirming: the address is suppressed and someone asked for a
	// confirmation within ReconfirmWindow; the mail may go to it, and its
	// confirmation lifts the suppression. Get and Subscribe report it.
	Reconfirming bool `json:"-"`
	// Ended: the call that returned this subscriber (Unsubscribe,
	// MarkBounced, a change of topics that left none) ended the
	// subscription; false when it had ended before (an unsubscribe link
	// used again).
	Ended bool `json:"-"`
	// Tags are the person's tags, sorted (tags.go); Fields their values
	// of the declared custom fields (fields.go). Get, GetByID and
	// SubscribersByID read them; nil when none.
	Tags   []string          `json:"tags,omitempty"`
	Fields map[string]string `json:"fields,omitempty"`
}

// Errors the store returns. Callers test them with errors.Is.
var (
	ErrNotFound      = errors.New("subscriber not found")
	ErrAlreadyActive = errors.New("subscriber is already active")
	ErrNotPending    = errors.New("subscription is not waiting for confirmation")
	ErrExists        = errors.New("address is already on the list")
	// ErrConfirmHeld: the address is pending and was sent a confirmation
	// within the cooldown (or as many as a day allows); nothing changed.
	ErrConfirmHeld = errors.New("a confirmation was sent to this address recently")
	// ErrSuppressed: the address bounced or reported our mail as spam; a
	// signup, an import or no-double-opt-in cannot activate it or make it
	// pending. Only its own confirmation (a signup's confirmation mail)
	// or an admin (LiftSuppression) lifts that.
	ErrSuppressed = errors.New("this address bounced or reported our mail as spam; only its own confirmation or an admin can lift that")
	// ErrNotActive: the change needs an active subscription.
	ErrNotActive = errors.New("subscription is not active")
	// ErrNotSuppressed: the address is neither bounced nor complained.
	ErrNotSuppressed = errors.New("address is not suppressed")
	// ErrErased: the address was erased at its owner's request (Erase);
	// an import (OnlyNew) must not bring it back. Only the person's own
	// signup and confirmation do.
	ErrErased = errors.New("this address was erased at its owner's request; only their own signup brings it back")
)

// SubscribeRequest asks to add or re-add an address.
type SubscribeRequest struct {
	Email, Name, Timezone string
	// Activate skips double opt-in.
	Activate bool
	// Outbox is written atomically with the subscriber: the confirmation, or
	// the welcome when Activate is set. An empty ID writes none.
	Outbox outbox.Entry
	// OnlyNew leaves an existing address as it is (ErrExists): an import
	// must never re-subscribe someone who left.
	OnlyNew bool
	// Hold limits the confirmations to one mailbox (address.Mailbox, the
	// HoldConfirm allowance): people use signup forms to flood a
	// victim's inbox, under every spelling of its address.
	Hold ConfirmHold
	// Topics are the topics chosen (ids the caller checked against the
	// topics file); nil gives the default ones. They replace an ended or
	// pending subscription's topics; a held confirmation changes nothing.
	Topics []string
	// Source is how the person came in (the consent's source, shown in
	// the export and the console); empty keeps what was recorded.
	Source ConsentSource
	// Tags are added to the person's (CheckTag'd here; registered as
	// known once stored), and Fields merged into their values (the
	// caller checks them against the declarations: CheckFieldValues), in
	// the same step, when the request adds or re-opens a subscription
	// (not when it only sends a pending one's confirmation again).
	Tags   []string
	Fields map[string]string
	// Reason and Actor: why an admin added the person without double
	// opt-in, and who (SourceAdmin), kept in the consent record.
	Reason, Actor string
}

// Preferences are what a person sets in the preference centre.
type Preferences struct {
	Topics         []string
	Name, Timezone string
	// FromIssue is the issue whose mail's link opened the preference
	// centre (0: none): a change that leaves no topic, ending the
	// subscription, counts for that issue as UnsubscribeFrom does.
	FromIssue int64
}

// ConfirmHold limits the mails one mailbox gets because someone typed its
// address into a public form (a confirmation, an unsubscribe link). The
// zero value holds nothing.
type ConfirmHold struct {
	Every  time.Duration // at most one in this window
	PerDay int           // and at most this many a day (0: no cap)
}

// The allowances ConfirmHold counts, one per kind of mail a stranger can
// cause to be sent.
const (
	HoldConfirm     = "confirm"     // confirmations (Subscribe takes it)
	HoldUnsubscribe = "unsubscribe" // the unsubscribe link mailed on request
)

// ReconfirmWindow is how often a suppressed (bounced or complained)
// address can be sent a confirmation: once in this window, whoever asks.
const ReconfirmWindow = 30 * 24 * time.Hour

// MailHolds are the per-mailbox allowances of mail sent on a stranger's
// request (ConfirmHold). The key is the canonical mailbox
// (address.Mailbox), not the address as typed.
type MailHolds interface {
	// TakeHold counts one mail of kind (HoldUnsubscribe, HoldConfirm) to
	// email's mailbox: false, and nothing counted, when one was counted
	// within h.Every or h.PerDay were counted in the last day. The zero h
	// holds nothing and counts nothing.
	TakeHold(ctx context.Context, kind, email string, h ConfirmHold) (bool, error)
	// GiveBackHold undoes the last count of kind for email's mailbox: the
	// mail did not go out (it could not be rendered), so it must not use
	// up the allowance. For HoldConfirm it also gives a suppressed
	// address its ReconfirmWindow back.
	GiveBackHold(ctx context.Context, kind, email string) error
}

// Mark names one delivery: mail Kind for Key (a period, a request nonce or a
// bundle id) to one subscriber.
type Mark struct {
	Kind         string
	Key          string
	SubscriberID int64
	// Shared marks are one of many with the same Kind and Key (a digest
	// period, the once-per-subscriber welcome); Redis keeps them as one
	// bitmap per key, an eighth of a byte per subscriber.
	Shared bool
}

// Claim is the outcome of claiming a Mark.
type Claim int

// Claim outcomes.
const (
	Claimed     Claim = iota // the caller may send
	AlreadySent              // a previous run sent it: skip
	Busy                     // another run holds the claim: try again later
)

// Subscribers is the subscriber list: every state change of one address is
// atomic, and those that call for a task write its outbox entry in the same
// step.
type Subscribers interface {
	// Subscribe adds email or re-opens an ended subscription. An active
	// subscriber gives ErrAlreadyActive and changes nothing.
	//
	// A suppressed address (bounced, complained) keeps its status and
	// stays on the suppression list: with Activate, or without an outbox
	// entry, Subscribe answers ErrSuppressed and changes nothing. A
	// confirmation (not Activate, an outbox entry) is written at most once
	// per ReconfirmWindow (ErrConfirmHeld otherwise, as within the Hold):
	// the answer is the subscriber as it was, with Reconfirming set, and
	// the name, time zone and topics wait for the confirmation.
	Subscribe(ctx context.Context, req SubscribeRequest) (Subscriber, error)
	// Confirm activates a pending subscription and writes the welcome's
	// outbox entry; a suppressed one that is Reconfirming too (the
	// person's own confirmation lifts the suppression). Already active:
	// the subscriber and ErrAlreadyActive. Unsubscribed, or bounced or
	// complained without a confirmation asked for: ErrNotPending.
	Confirm(ctx context.Context, email string, welcome outbox.Entry) (Subscriber, error)
	// Unsubscribe ends the subscription at once and drops the named outbox
	// entries, so neither the queue nor the relay can mail afterwards.
	Unsubscribe(ctx context.Context, email string, cancel ...string) (Subscriber, error)
	// UnsubscribeFrom is Unsubscribe through a link of issue's mail: a
	// subscription it ends counts, in the same step, once per person
	// among those who left because of that issue (IssueUnsubscribes).
	UnsubscribeFrom(ctx context.Context, email string, issue int64, cancel ...string) (Subscriber, error)
	// MarkBounced stops all mail to email after a permanent failure.
	MarkBounced(ctx context.Context, email string) error
	// SetPreferences replaces an active subscriber's topics (ids the
	// caller checked), name and time zone. No topic left ends the
	// subscription as Unsubscribe does. Not active: ErrNotActive, nothing
	// changes.
	SetPreferences(ctx context.Context, email string, p Preferences, cancel outbox.Cancel) (Subscriber, error)
	// LeaveTopic turns one topic off (one-click from a mail of that
	// topic), as SetPreferences. A topic already off changes nothing.
	LeaveTopic(ctx context.Context, email, topic string, cancel outbox.Cancel) (Subscriber, error)
	// LeaveTopicFrom is LeaveTopic through a link of issue's mail: a
	// topic turned off (or the subscription ended) counts as
	// UnsubscribeFrom's does.
	LeaveTopicFrom(ctx context.Context, email, topic string, issue int64, cancel outbox.Cancel) (Subscriber, error)
	// Get returns the subscriber with that (normalised) address.
	Get(ctx context.Context, email string) (Subscriber, error)
	// GetByID returns the subscriber with that id (the links in mails
	// name subscribers by id), or ErrNotFound.
	GetByID(ctx context.Context, id int64) (Subscriber, error)
	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error
}

// Outbox holds tasks that must reach the queue (see outbox.Entry).
type Outbox interface {
	// OutboxDone removes entries once their tasks are in the queue.
	OutboxDone(ctx context.Context, ids ...string) error
	// OutboxDue lists up to limit entries due before t, oldest first.
	OutboxDue(ctx context.Context, before time.Time, limit int) ([]outbox.Entry, error)
}

// Marks are the delivery marks (see the package doc).
type Marks interface {
	// ClaimMarks reserves each mark for ttl, in one round trip, on behalf
	// of owner (the task sending them); the claims line up with marks. A
	// mark whose live claim has the same non-empty owner is claimed again:
	// a retry takes over what its own dead attempt held, and only another
	// run is kept out (Busy) until the claim expires.
	ClaimMarks(ctx context.Context, owner string, marks []Mark, ttl time.Duration) ([]Claim, error)
	// MarkSent records the marks as delivered and drops their claims, in
	// one round trip.
	MarkSent(ctx context.Context, marks ...Mark) error
	// ReleaseMarks drops claims after a failed or abandoned send, so a
	// retry may go.
	ReleaseMarks(ctx context.Context, marks []Mark) error
	// SentMarks tells, in one round trip, which marks are recorded as
	// sent (a sequence's progress).
	SentMarks(ctx context.Context, marks []Mark) ([]bool, error)
}

// Store is every part of the store; each consumer names only the parts it
// uses. All methods are safe for concurrent use.
type Store interface {
	Subscribers
	Outbox
	Marks
	Digests
	Issues
	Feeds
	Suppressions
	MailHolds
	PushSubscriptions
	Devices
	Phones
	ChannelChoices
	Tags
	Fields
	Segments
	PersonOrder
	Webhooks
	Tokens
	SettingsStore
	// The audit log (audit.go).
	audit.Recorder
	audit.Reader
	People
	List
	EngagementStore
	EventKeys
}
