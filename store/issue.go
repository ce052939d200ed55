package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/newsletter/newsletter/internal/outbox"
)

// Issue statuses: draft → scheduled → sending → sent, or paused (and back
// to sending), or cancelled. Only a draft or scheduled issue may change;
// from sending on, what goes out is frozen.
const (
	IssueDraft     = "draft"
	IssueScheduled = "scheduled"
	IssueSending   = "sending"
	IssueSent      = "sent"
	IssuePaused    = "paused"
	IssueCancelled = "cancelled"
	// IssueTrashed is an issue moved to the trash (TrashIssue): kept
	// TrashDays, then purged; RestoreIssue brings it back.
	IssueTrashed = "trashed"
)

// TrashDays is how long a trashed issue is kept before it may be purged.
const TrashDays = 30

// IssueStatuses lists every status a list may be filtered by; the
// trashed ones are listed on their own (ListIssues with IssueTrashed).
var IssueStatuses = []string{IssueDraft, IssueScheduled, IssueSending, IssueSent, IssuePaused, IssueCancelled}

// IssueMarkKind is the mark kind of an issue's mails (key: the issue id):
// its sent counter counts these marks.
const IssueMarkKind = "issue"

// Errors of the issues.
var (
	ErrNoIssue = errors.New("no such issue")
	// ErrIssueState: the issue is not in a status that allows the change
	// (editing a sent issue, a second send); nothing changed. The error
	// returned wraps it in a *StateError that names the status.
	ErrIssueState = errors.New("the issue's status does not allow that")
	// ErrIssueStale: the issue changed since the caller read it (another
	// edit, or a move of its status in between); nothing changed.
	ErrIssueStale = errors.New("the issue changed since you opened it")
	// ErrSlugTaken: another issue has the slug asked for; nothing
	// changed.
	ErrSlugTaken = errors.New("another issue has this slug")
	// ErrBadSlug: the slug asked for is not of the form ValidSlug
	// accepts; nothing changed.
	ErrBadSlug = errors.New("a slug is 1 to 80 lower-case letters, digits and hyphens, starting with a letter or digit")
)

// StateError is a change the issue's status does not allow: it names the
// status, so every refusal can say why. It matches ErrIssueState.
type StateError struct {
	ID     int64
	Status string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("issue %d is %s: that is not allowed in this status", e.ID, e.Status)
}

// Is makes errors.Is(err, ErrIssueState) hold for a *StateError.
func (e *StateError) Is(target error) bool { return target == ErrIssueState }

// IssueContent is what a publisher writes: each save keeps the previous
// one as a version.
type IssueContent struct {
	Subject   string   `json:"subject"`
	Preheader string   `json:"preheader,omitempty"`
	Body      string   `json:"body"`
	Topics    []string `json:"topics"`
	// Segment, when set, is the id of the segment the issue goes to:
	// its active people (of any of Topics, when it names topics too).
	// Such an issue is not published in the archive.
	Segment int64 `json:"segment,omitempty"`
	// ReplyTo, when set, is the Reply-To of the issue's mails: where a
	// reader's answer goes (issues.CheckContent checks it).
	ReplyTo string `json:"reply_to,omitempty"`
}

// MaxIssueVersions is how many previous contents an issue keeps: the
// oldest goes when a save pushes one more.
const MaxIssueVersions = 20

// IssueVersion is one previous content of an issue: its version number
// (the Issue.Version it had) and when it was saved.
type IssueVersion struct {
	Version int `json:"version"`
	IssueContent
	SavedAt time.Time `json:"saved_at"`
}

// Issue is one letter a publisher writes and sends.
type Issue struct {
	ID   int64  `json:"id"`
	Slug string `json:"slug"`
	IssueContent
	Status  string `json:"status"`
	Version int    `json:"version"`
	// Period is the digest period the issue was made from by the weekly
	// digest run ("" for a publisher's own issue).
	Period string `json:"period,omitempty"`
	// SendAt is when sending starts (scheduled); LocalTime, when set, is
	// the hour ("09:00") each reader gets it at in their own time zone.
	SendAt    time.Time `json:"send_at,omitzero"`
	LocalTime string    `json:"local_time,omitempty"`
	// FirstLocal and LastLocal are, for a local-hour send whose planner
	// has walked its readers, the first and the last reader's hour: a
	// local-hour send stays scheduled (editable, reschedulable) until
	// the first of them, when its first batch goes out.
	FirstLocal time.Time `json:"first_local,omitzero"`
	LastLocal  time.Time `json:"last_local,omitzero"`
	// PausedFrom is the status a paused issue left (scheduled or
	// sending): a resume puts it back there.
	PausedFrom string `json:"paused_from,omitempty"`
	// TrashedFrom is the status a trashed issue left (draft, scheduled
	// or sent), TrashedAt when: a restore puts it back (a scheduled one
	// as a draft).
	TrashedFrom string    `json:"trashed_from,omitempty"`
	TrashedAt   time.Time `json:"trashed_at,omitzero"`
	// Round counts the plans: each resume plans again (a new round of
	// task ids), the delivery marks skip who already got it.
	Round     int       `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	SentAt    time.Time `json:"sent_at,omitzero"`
}

// IssueStatus is where an issue's sending stands, without its content:
// what a sender looks at between mails. Reading it is one small reply,
// where the whole issue carries its body.
type IssueStatus struct {
	Status  string
	Round   int
	Version int
}

// IssueProgress is an issue's sending, counted as a digest run's is.
type IssueProgress struct {
	Status     string `json:"status"`
	Planned    int64  `json:"planned"`
	Sent       int64  `json:"sent"`
	Skipped    int64  `json:"skipped"`
	Failed     int64  `json:"failed"`
	Bounces    int64  `json:"bounces"`
	Complaints int64  `json:"complaints"`
	// The planner's place: the last reader planned in this round, the
	// furthest ever planned (planned counts each reader once across
	// rounds), whether this round's walk is done. Walk says in which
	// order the issue's readers are walked, and so what the cursors are.
	Cursor    int64  `json:"-"`
	MaxCursor int64  `json:"-"`
	PlanDone  bool   `json:"-"`
	Round     int    `json:"-"`
	Walk      string `json:"-"`
}

// The orders an issue's planner walks its readers in (IssueProgress.Walk).
const (
	// WalkByShard: shard by shard (AudienceByShard); the cursors are walk
	// keys (WalkKey). Every issue planned since layout 4's batches by
	// shard.
	WalkByShard = "shards"
	// WalkByID: in id order (AudienceAfter); the cursors are ids. An
	// issue an earlier release began to plan keeps this order in every
	// round, so that what it counted as planned stays counted once.
	WalkByID = "ids"
)

// WalkOf is the order an issue's readers are walked in: the one its plan
// began in, or by shard for an issue not planned yet.
func (p IssueProgress) WalkOf() string {
	switch {
	case p.Walk != "":
		return p.Walk
	case p.MaxCursor > 0:
		return WalkByID // planned in part by a release before the order was kept
	default:
		return WalkByShard
	}
}

// IssueChange is what a status transition sets besides the status.
type IssueChange struct {
	// SetSchedule writes SendAt and LocalTime (zero values clear them);
	// without it the schedule stays as it is.
	SetSchedule bool
	SendAt      time.Time
	LocalTime   string
	// NewRound starts a new plan (resume): the cursor goes back to 0.
	NewRound bool
	// Outbox, when it has an ID, is the plan task the change calls for,
	// written in the same step (the relay enqueues it if the caller
	// cannot).
	Outbox outbox.Entry
	// Round, when above 0, is the round the issue must be in (before a
	// NewRound): otherwise ErrIssueStale, nothing changed.
	Round int
	// Version, when above 0, is the version of the content the issue
	// must still have: otherwise ErrIssueStale, nothing changed (a send
	// confirmed on what the publisher saw).
	Version int
}

// Issues is the store's side of issues.
type Issues interface {
	// CreateIssue stores a draft; its slug is made from the subject,
	// with -2, -3… when taken (slug: the caller's, e.g. digest-<period>).
	CreateIssue(ctx context.Context, c IssueContent, slug string) (Issue, error)
	// UpdateIssue replaces a draft or scheduled issue's content, keeping
	// the previous one as a version, when its version is still version
	// (the one the caller read): ErrIssueStale otherwise, ErrIssueState
	// when its status does not allow it; nothing changed then.
	UpdateIssue(ctx context.Context, id int64, version int, c IssueContent) (Issue, error)
	// UpdateIssueSlug is UpdateIssue that also moves the issue to slug
	// ("": it keeps its own), freeing its old one: ErrSlugTaken when
	// another issue has it, ErrBadSlug when it is not ValidSlug's;
	// nothing changed then.
	UpdateIssueSlug(ctx context.Context, id int64, version int, c IssueContent, slug string) (Issue, error)
	Issue(ctx context.Context, id int64) (Issue, error)
	// IssueStatus is the issue's status, round and version alone
	// (ErrNoIssue when there is none).
	IssueStatus(ctx context.Context, id int64) (IssueStatus, error)
	// DigestIssue is the issue of period's digest run, made once: the
	// first call stores c as a draft with slug digest-<period> (-2… when
	// taken) and Period set, and links it to the run in the same step;
	// later calls return that issue, whatever c. ErrNoRun without a run.
	DigestIssue(ctx context.Context, period string, c IssueContent) (Issue, error)
	// IssueBySlug is the issue with that slug (the archive's seam).
	IssueBySlug(ctx context.Context, slug string) (Issue, error)
	// IssueVersions are the previous contents, oldest first, the last
	// MaxIssueVersions of them (ErrNoIssue when there is no issue).
	IssueVersions(ctx context.Context, id int64) ([]IssueVersion, error)
	// TrashIssue moves a draft, scheduled or sent issue to the trash
	// (TrashedFrom, TrashedAt set; a scheduled one's plan is void):
	// a *StateError when it is in another status, ErrNoIssue when there
	// is none; nothing changed then.
	TrashIssue(ctx context.Context, id int64) (Issue, error)
	// RestoreIssue brings a trashed issue back to the status it left,
	// a scheduled one as a draft (its time may have passed): a
	// *StateError when it is not trashed, ErrNoIssue when there is none.
	RestoreIssue(ctx context.Context, id int64) (Issue, error)
	// PurgeTrash removes for good up to limit issues trashed before
	// before, with their versions and slugs, and says how many.
	PurgeTrash(ctx context.Context, before time.Time, limit int) (int, error)
	// ListIssues lists up to limit issues with ids below after (0: from
	// the newest), newest first, of status ("" : any but trashed;
	// IssueTrashed: the trash).
	ListIssues(ctx context.Context, status string, after int64, limit int) ([]Issue, error)
	// SentIssues lists sent issues with topic among their topics ("" :
	// any), newest first (the archive's seam).
	SentIssues(ctx context.Context, topic string, after int64, limit int) ([]Issue, error)
	// TransitionIssue moves the issue from one of from to to, atomically:
	// ErrIssueState, nothing changed, when it is in another status;
	// ErrIssueStale when ch names a round or version it no longer has.
	// A move to paused records the status it left (PausedFrom).
	TransitionIssue(ctx context.Context, id int64, from []string, to string, ch IssueChange) (Issue, error)
	// RecordLocalSpan widens round's span of a local-hour send's held
	// batches (Issue.FirstLocal, LastLocal) to first and last; nothing
	// when the issue is in another round.
	RecordLocalSpan(ctx context.Context, id int64, round int, first, last time.Time) error
	// IssueAudience counts the active readers of any of topics: whom a
	// send would reach now.
	IssueAudience(ctx context.Context, topics []string) (int64, error)
	// IssueProgress counts the issue's sending.
	IssueProgress(ctx context.Context, id int64) (IssueProgress, error)
	// IssueUnsubscribes counts the people who left through the issue's
	// unsubscribe or preferences links, each once (UnsubscribeFrom).
	IssueUnsubscribes(ctx context.Context, id int64) (int64, error)
	// AdvanceIssuePlan saves the planner's cursor after a page of a walk
	// in order walk (WalkByShard, WalkByID; kept with the cursor):
	// planned grows by n (readers past the furthest planned before);
	// done ends the round's walk. A round other than the issue's changes
	// nothing (a stale planner), nor does a page whose cursor is not
	// past the saved one but its done flag (saving a page again is safe).
	AdvanceIssuePlan(ctx context.Context, id int64, round int, walk string, cursor int64, n int, done bool) error
	// AudienceByShard lists up to limit active readers of any of topics
	// ("" among them: every active one) whose walk keys (WalkKey) are
	// past after, in walk-key order: shard by shard, so that a run of
	// them sits in one or two shards.
	AudienceByShard(ctx context.Context, topics []string, after int64, limit int) ([]int64, error)
	// FinishIssue marks a sending issue sent once its walk is done and
	// every planned reader is sent, skipped or failed.
	FinishIssue(ctx context.Context, id int64) (bool, error)
	// ArchiveGeneration grows each time an issue becomes sent (in the
	// same step): the archive's caches compare it instead of reading
	// the issues again.
	ArchiveGeneration(ctx context.Context) (int64, error)
}

// DigestIssueSlug is the slug of period's digest issue: "digest-" and
// the period in the form of every slug (lower case; "_" and "." become
// "-"), so 2026-W49's is digest-2026-w49.
func DigestIssueSlug(period string) string {
	return "digest-" + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, period)
}

// slugPattern is every slug's form: what Slugify and DigestIssueSlug
// make, and what a publisher may choose (the archive's path segment).
var slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,79}$`)

// ValidSlug tells whether s has a slug's form: 1 to 80 lower-case
// letters, digits and hyphens, the first a letter or digit.
func ValidSlug(s string) bool { return slugPattern.MatchString(s) }

// Slugify makes a URL slug of a subject: lower-case letters and digits
// joined by single hyphens, at most 60 characters ("issue" when nothing
// is left).
func Slugify(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		default:
			dash = true
		}
		if b.Len() >= 60 {
			break
		}
	}
	out := strings.TrimRight(b.String(), "-")
	if len(out) > 60 {
		out = strings.TrimRight(out[:60], "-")
	}
	if out == "" {
		return "issue"
	}
	return out
}

// Editable tells the statuses whose content may change.
func Editable(status string) bool { return status == IssueDraft || status == IssueScheduled }
