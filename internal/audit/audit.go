package audit

import (
	"context"
	"log/slog"
	"os/user"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/newsletter/newsletter/internal/adminauth"
)

// MaxEntries is about how many entries the log keeps; older ones go.
const MaxEntries = 100000

// Entry is one change: who (Actor, with Role) did Action to Target, At.
// ID is the log's (ascending with time); Detail says more where the
// action needs it (a role, a period, counts), never an address.
type Entry struct {
	ID     string    `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Role   string    `json:"role"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Detail string    `json:"detail,omitempty"`
}

// Recorder writes entries (the store).
type Recorder interface {
	// Record appends e (its ID is the log's; At, when zero, now).
	Record(ctx context.Context, e Entry) error
}

// Reader reads the log (the store).
type Reader interface {
	// AuditEntries is up to limit entries older than the entry with ID
	// after ("" : from the newest), newest first.
	AuditEntries(ctx context.Context, after string, limit int) ([]Entry, error)
}

// The actions. A name is the thing, a dot, what happened to it.
const (
	IssueCreated      = "issue.created"
	IssueUpdated      = "issue.updated"
	IssueTestSent     = "issue.test_sent"
	IssueSent         = "issue.sent" // or scheduled: Detail says when
	IssuePaused       = "issue.paused"
	IssueResumed      = "issue.resumed"
	IssueCancelled    = "issue.cancelled"
	IssueRescheduled  = "issue.rescheduled"
	IssueUnscheduled  = "issue.unscheduled"
	IssueDuplicated   = "issue.duplicated" // the new draft's target; Detail names the original
	IssueDeleted      = "issue.deleted"    // moved to the trash; Detail names the status it left
	IssueUntrashed    = "issue.untrashed"  // back from the trash; Detail names its status
	MediaUploaded     = "media.uploaded"   // target media:<name>; Detail the image's type
	IssueRestored     = "issue.restored"   // Detail names the version restored
	ItemAdded         = "item.added"
	ItemUpdated       = "item.updated"
	ItemDeleted       = "item.deleted"
	EventPosted       = "event.posted"
	BounceReported    = "bounce.reported"
	SuppressionLifted = "suppression.lifted"
	WebhookAdded      = "webhook.added"
	WebhookRemoved    = "webhook.removed"
	WebhookEnabled    = "webhook.enabled"
	WebhookDisabled   = "webhook.disabled"
	WebhookTested     = "webhook.tested"
	TokenCreated      = "token.created"
	TokenRevoked      = "token.revoked"
	DigestRun         = "digest.run"
	Imported          = "subscribers.imported"
	SubscriberErased  = "subscriber.erased"
	SubscriberChanged = "subscriber.changed"
	SubscriberExport  = "subscriber.exported"
	DeviceAdded       = "device.added"
	DeviceRemoved     = "device.removed"
	PhoneSet          = "phone.set"
	PhoneRemoved      = "phone.removed"
	// The console's accounts (target "account:<address>": a colleague's
	// address, never a subscriber's).
	AccountInvited         = "account.invited"
	AccountAccepted        = "account.accepted"
	AccountSuspended       = "account.suspended"
	AccountRestored        = "account.restored"
	AccountRoleChanged     = "account.role_changed"
	AccountPasswordChanged = "account.password_changed"
	AccountTOTPEnabled     = "account.totp_enabled"
	AccountInviteRevoked   = "account.invite_revoked"
	FieldDeclared          = "field.declared"
	SegmentSaved           = "segment.saved"
	SegmentDeleted         = "segment.deleted"
	SettingsChanged        = "settings.changed" // Detail names the fields that changed
	// The catalog (target "topics", "sequence" or "template:<name>"):
	// Detail names what changed and the version saved.
	TopicsChanged   = "topics.changed"
	SequenceChanged = "sequence.changed"
	TemplateChanged = "template.changed"
)

// Hasher is the keyed hash of an address (*logredact.Redactor).
type Hasher interface {
	Hash(address string) string
}

// Subscriber is the target naming the person with address: the keyed
// hash the logs show, never the address.
func Subscriber(h Hasher, address string) string { return "subscriber:" + h.Hash(address) }

// Issue is the target naming issue id, for the API, the console and the
// commands alike.
func Issue(id int64) string { return "issue:" + strconv.FormatInt(id, 10) }

// Account is the target naming the console's account with address.
func Account(address string) string { return "account:" + address }

// CLIRole is the role an entry of a command shows: whoever runs the
// commands holds the service's Redis, and no token.
const CLIRole = "cli"

// CLIActor names the person running a command: "cli:" and their user
// name on this machine, or "cli" when it cannot be told.
func CLIActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli"
}

// Trail records entries for the API, the console and the commands, with
// the failure policy of the package: a failed write is logged whole and
// counted, never dropped silently.
type Trail struct {
	rec    Recorder
	hash   Hasher
	log    *slog.Logger
	failed prometheus.Counter
}

// NewTrail records to rec, hashes addresses with hash, and logs to log a
// failed write, counted in newsletter_audit_write_failures_total
// (registered on reg; nil: not registered).
func NewTrail(rec Recorder, hash Hasher, log *slog.Logger, reg prometheus.Registerer) *Trail {
	t := &Trail{rec: rec, hash: hash, log: log, failed: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "newsletter_audit_write_failures_total",
		Help: "Audit entries that could not be written after their change was made (each is logged at error level).",
	})}
	if reg != nil {
		reg.MustRegister(t.failed)
	}
	return t
}

// Subscriber is the target naming the person with address.
func (t *Trail) Subscriber(address string) string { return Subscriber(t.hash, address) }

// Note records e after its change was made. Actor and Role, when empty,
// are the principal of ctx (adminauth.FromContext). A failed write is
// logged (with the entry) and counted; Note reports it too, for the
// callers that say so in their answer.
func (t *Trail) Note(ctx context.Context, e Entry) error {
	if e.Actor == "" {
		if p, ok := adminauth.FromContext(ctx); ok {
			e.Actor, e.Role = p.Name, string(p.Role)
		} else {
			e.Actor = "unknown"
		}
	}
	// A change made must be recorded even when the request that made it
	// ends now (the client left, its deadline passed).
	err := t.rec.Record(context.WithoutCancel(ctx), e)
	if err != nil {
		t.failed.Inc()
		t.log.Error("audit: could not record a change that was made; this line is its entry",
			"err", err, "actor", e.Actor, "role", e.Role, "action", e.Action, "target", e.Target, "detail", e.Detail)
	}
	return err
}
