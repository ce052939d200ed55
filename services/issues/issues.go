// Package issues is the lifecycle of an issue: what a publisher may do
// with it in each status, and the one place each move is made. The API,
// the console and the commands call it, so a move behaves the same
// whichever door it came through.
//
// The states and their moves:
//
//	draft ──send now──────────────▶ sending ──(walk done, all sent)──▶ sent
//	draft ──send at / reschedule──▶ scheduled ──(its time)──▶ sending
//	scheduled ──send now──▶ sending      scheduled ──unschedule──▶ draft
//	scheduled ──reschedule──▶ scheduled (a new time, a new plan)
//	scheduled | sending ──pause──▶ paused ──resume──▶ the status it left
//	paused (from scheduled) ──reschedule──▶ scheduled, ──unschedule──▶ draft
//	draft | scheduled | sending | paused ──cancel──▶ cancelled
//
// A local-hour send (HH:MM in each reader's zone) is scheduled until the
// first reader's hour, and moved like any scheduled issue: its planner
// runs at once, holds each batch to its hour (Issue.FirstLocal and
// LastLocal the span), and the first batch due moves it to sending with
// a status-and-round check, so a move racing it lands whole or is refused.
//
// Every move that plans is one store step that checks the status and the
// round the caller read (and, when given, the content's version), and
// writes the plan task it calls for into the outbox in the same step.
// Pause and cancel plan nothing: they take the issue from whichever of
// their statuses it is in when they run. A plan task of
// an earlier round finds its round gone and does nothing, so a move never
// needs to find and delete the task it replaces.
//
// Its model-based test is model_test.go: random sequences of these moves,
// clock steps and worker restarts, through this service and a real worker
// over SMTP, checked after every step against a plain model of the states
// above (docs/development.md).
package issues

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/address"
	"github.com/newsletter/newsletter/internal/mdlimit"
	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/presend"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// The limits of an issue (docs/reference.md lists them).
const (
	MaxBody    = 512 << 10
	MaxSubject = 200
)

// ErrTooLarge is an issue whose body is over MaxBody (413).
var ErrTooLarge = fmt.Errorf("the body is over %d bytes", MaxBody)

// ErrNoReaders is a send that would reach nobody, refused unless forced
// (409): a send to a topic with no one on it is a mistake far more often
// than a wish.
var ErrNoReaders = errors.New("the issue would reach 0 readers; send with force to send it anyway")

// AudienceChangedError is a send whose confirmed audience is no longer
// the one it would reach (409): the publisher agreed to another number.
type AudienceChangedError struct{ Confirmed, Now int64 }

func (e *AudienceChangedError) Error() string {
	return fmt.Sprintf("the audience changed: you confirmed %d readers, it is %d now", e.Confirmed, e.Now)
}

// InputError is a bad field of an issue or a move: the caller's to fix
// (400), and nothing changed.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func bad(format string, a ...any) error { return &InputError{Msg: fmt.Sprintf(format, a...)} }

// CheckContent is the one check of an issue's content: nil, ErrTooLarge
// or an *InputError (a bad field, or a body too complex to render in
// linear time: mdlimit).
func CheckContent(known *topics.Set, c store.IssueContent) error {
	if len(c.Body) > MaxBody {
		return ErrTooLarge
	}
	switch {
	case c.Subject == "" || len([]rune(c.Subject)) > MaxSubject || strings.ContainsAny(c.Subject, "\r\n"):
		return bad("subject: one line of 1 to %d characters", MaxSubject)
	case len([]rune(c.Preheader)) > MaxSubject || strings.ContainsAny(c.Preheader, "\r\n"):
		return bad("preheader: one line of at most %d characters", MaxSubject)
	case len(c.Topics) == 0 && c.Segment == 0:
		return bad("topics: name at least one topic, or a segment")
	case c.Segment < 0:
		return bad("segment: no such segment")
	}
	for _, t := range c.Topics {
		if tp, ok := known.Topic(t); !ok {
			return bad("topics: unknown topic %q", t)
		} else if tp.Retired {
			return bad("topics: topic %q is retired", t)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(c.Topics)))) != len(c.Topics) {
		return bad("topics: a topic is named twice")
	}
	// A body whose rendering would not be linear in its size is refused
	// here, where the writer can change it, not found by the worker.
	if err := mdlimit.Check(c.Body); err != nil {
		return bad("body: %v", err)
	}
	if c.ReplyTo != "" {
		norm, err := address.Normalize(c.ReplyTo)
		if err != nil || norm != c.ReplyTo {
			return bad("reply_to: one e-mail address, e.g. editor@example.com (lower case, no name)")
		}
	}
	return nil
}

// NormalizeReplyTo is a Reply-To as typed, in the one form CheckContent
// accepts (trimmed, normalised), or as it was when it is no address (the
// check then says why).
func NormalizeReplyTo(raw string) string {
	raw = strings.TrimSpace(raw)
	if norm, err := address.Normalize(raw); err == nil {
		return norm
	}
	return raw
}

// When is when a send is asked for: both empty is now; At an RFC 3339
// time in the future; LocalTime an hour HH:MM in each reader's zone.
type When struct{ At, LocalTime string }

// Detail says when the send was asked for, as the audit log records it.
func (w When) Detail() string {
	switch {
	case w.At != "":
		return "at " + w.At
	case w.LocalTime != "":
		return "at " + w.LocalTime + " local time"
	}
	return "now"
}

// schedule is a checked When: the status it leads to, when the plan is
// due, and the schedule the issue keeps.
type schedule struct {
	to        string
	due       time.Time
	sendAt    time.Time
	localTime string
}

func (w When) check(now time.Time) (schedule, error) {
	switch {
	case w.At != "" && w.LocalTime != "":
		return schedule{}, bad("give at or local_time, not both")
	case w.At != "":
		t, err := time.Parse(time.RFC3339, w.At)
		if err != nil {
			return schedule{}, bad("at: an RFC 3339 time, e.g. 2026-01-05T09:00:00Z")
		}
		if !t.After(now) {
			return schedule{}, bad("at: a time in the future")
		}
		// The plan is due on a whole second: asynq keeps due times in
		// seconds, so a fraction would let it start before its time.
		t = t.UTC().Truncate(time.Millisecond)
		return schedule{to: store.IssueScheduled, due: ceilSecond(t), sendAt: t}, nil
	case w.LocalTime != "":
		if _, err := time.Parse("15:04", w.LocalTime); err != nil || len(w.LocalTime) != 5 {
			return schedule{}, bad("local_time: an hour HH:MM, e.g. 09:00")
		}
		// Planned at once, scheduled until the first reader's hour.
		return schedule{to: store.IssueScheduled, due: now, localTime: w.LocalTime}, nil
	}
	return schedule{to: store.IssueSending, due: now}, nil
}

func ceilSecond(t time.Time) time.Time {
	if s := t.Truncate(time.Second); !s.Equal(t) {
		return s.Add(time.Second)
	}
	return t
}

// Dispatcher enqueues a job now (tasks.Dispatcher does); a failure is
// no loss, the outbox entry written with the move stays for the relay.
type Dispatcher interface {
	Dispatch(ctx context.Context, j tasks.Job) (duplicate bool, err error)
}

// Service makes the moves of issues. Its zero value is not usable: set
// Store and Jobs.
type Service struct {
	Store store.Issues
	Jobs  Dispatcher
	Log   *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// BulkReady, when set, may refuse any send or schedule
	// (settings.Cache.BulkReady: no postal address yet); nothing changes
	// then.
	BulkReady func(ctx context.Context) error
	// HTMLSize, when set, measures a send's HTML part: one over
	// ClipBytes is refused unless forced (size.go).
	HTMLSize HTMLSizer
	// Checks, when set, runs the pre-send checks (Checker.Run): an
	// error among them refuses a send unless ignored (checks.go).
	Checks func(ctx context.Context, is store.Issue) ([]presend.Result, error)
}

// Parts are what a Service is made of, as every door that moves issues
// has them: the API, the console, the issue command and the feeds'
// poller.
type Parts struct {
	Store store.Issues
	Jobs  Dispatcher
	Log   *slog.Logger
	Now   func() time.Time
	// BulkReady is the settings' gate on bulk mail
	// (settings.Cache.BulkReady; nil: none).
	BulkReady func(ctx context.Context) error
	// Sizer measures a send's HTML part (the issue renderer; nil: no
	// size guard, as where no mail templates are loaded).
	Sizer interface {
		HTMLSize(ctx context.Context, is store.Issue) (int, error)
	}
	// Checker runs the pre-send checks before a send (nil: none).
	Checker *Checker
}

// New is the one way a Service is made from its parts, so the API, the
// console, the command and the worker cannot differ in how their moves
// are guarded (the bulk-mail gate, the size guard).
func New(p Parts) *Service {
	s := &Service{Store: p.Store, Jobs: p.Jobs, Log: p.Log, Now: p.Now, BulkReady: p.BulkReady}
	if p.Sizer != nil {
		s.HTMLSize = p.Sizer.HTMLSize
	}
	if p.Checker != nil {
		s.Checks = p.Checker.Run
	}
	return s
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// Update saves new content of the issue is (as the caller read it) when
// it is still at version (the one the writer opened; 0: is's own):
// store.ErrIssueStale when it changed since, a *store.StateError when its
// status does not allow edits, an *InputError or ErrTooLarge for bad
// content; nothing changed then.
func (s *Service) Update(ctx context.Context, known *topics.Set, is store.Issue, version int, c store.IssueContent) (store.Issue, error) {
	return s.UpdateSlug(ctx, known, is, version, c, "")
}

// UpdateSlug is Update that also moves the issue to slug ("" or its own:
// it keeps it): an *InputError for a slug not of the store's form,
// store.ErrSlugTaken for another issue's; nothing changed then. Only a
// draft or scheduled issue changes, so no slug of the public archive
// ever moves: a sent issue's address stays its own.
func (s *Service) UpdateSlug(ctx context.Context, known *topics.Set, is store.Issue, version int, c store.IssueContent, slug string) (store.Issue, error) {
	if !store.Editable(is.Status) {
		return is, &store.StateError{ID: is.ID, Status: is.Status}
	}
	if err := CheckContent(known, c); err != nil {
		return is, err
	}
	if err := CheckSlug(slug); err != nil {
		return is, err
	}
	if version <= 0 {
		version = is.Version
	}
	out, err := s.Store.UpdateIssueSlug(ctx, is.ID, version, c, slug)
	if err != nil || !s.audienceChanged(is, out) {
		return out, err
	}
	// A local-hour send was planned for its old audience: planned again,
	// in a new round (its held batches then do nothing). A batch sending
	// meanwhile refuses the plan; it skips readers no longer on the
	// issue's topics.
	sc := schedule{to: store.IssueScheduled, due: s.now(), localTime: out.LocalTime}
	if moved, err := s.move(ctx, out, []string{store.IssueScheduled}, store.IssueScheduled, true, sc, out.Version); err != nil {
		s.log().Warn("issue: edited audience not planned again", "issue", is.ID, "err", err)
	} else {
		out = moved
	}
	return out, nil
}

// audienceChanged says an edit changed the readers of a local-hour send
// whose planner may have run already.
func (s *Service) audienceChanged(was, now store.Issue) bool {
	return now.Status == store.IssueScheduled && now.LocalTime != "" &&
		(was.Segment != now.Segment || !slices.Equal(slices.Sorted(slices.Values(was.Topics)), slices.Sorted(slices.Values(now.Topics))))
}

// CheckSlug refuses a slug a publisher chose that is not of the store's
// form ("" is none chosen).
func CheckSlug(slug string) error {
	if slug != "" && !store.ValidSlug(slug) {
		return bad("slug: %s (got %q)", store.ErrBadSlug, slug)
	}
	return nil
}

// CopySuffix ends the subject of a duplicate.
const CopySuffix = " (copy)"

// Duplicate makes a new draft with is's content (any status: a sent
// issue is a fine start for the next one), its subject marked as a copy
// (shortened to fit MaxSubject).
func (s *Service) Duplicate(ctx context.Context, is store.Issue) (store.Issue, error) {
	c := is.IssueContent
	c.Topics = slices.Clone(c.Topics)
	subject := []rune(c.Subject)
	if keep := MaxSubject - len([]rune(CopySuffix)); len(subject) > keep {
		subject = subject[:keep]
	}
	c.Subject = string(subject) + CopySuffix
	return s.Store.CreateIssue(ctx, c, "")
}

// ErrNoVersion is a restore of a version the issue does not keep (404).
var ErrNoVersion = fmt.Errorf("no such version: an issue keeps its last %d", store.MaxIssueVersions)

// Versions are is's previous contents, oldest first.
func (s *Service) Versions(ctx context.Context, is store.Issue) ([]store.IssueVersion, error) {
	return s.Store.IssueVersions(ctx, is.ID)
}

// Restore saves version n's content as the issue's newest (a new
// version: the current one is kept as a version too), when the issue is
// still at version (the one the writer saw; 0: is's own), as Update
// does: store.ErrIssueStale when it changed since, ErrNoVersion when n is
// not kept, the errors of Update otherwise.
func (s *Service) Restore(ctx context.Context, known *topics.Set, is store.Issue, version, n int) (store.Issue, error) {
	if !store.Editable(is.Status) {
		return is, &store.StateError{ID: is.ID, Status: is.Status}
	}
	vs, err := s.Versions(ctx, is)
	if err != nil {
		return is, err
	}
	for _, v := range vs {
		if v.Version == n {
			return s.Update(ctx, known, is, version, v.IssueContent)
		}
	}
	return is, ErrNoVersion
}

// Audience is how many readers a send of is would reach now: the active
// people of its segment (of its topics too, when it names both), or of
// any of its topics.
func (s *Service) Audience(ctx context.Context, is store.Issue) (int64, error) {
	if is.Segment == 0 {
		return s.Store.IssueAudience(ctx, is.Topics)
	}
	segs, ok := s.Store.(SegmentStore)
	if !ok {
		return 0, bad("segment: this store keeps no segments")
	}
	expr, err := segs.IssueSegmentExpr(ctx, is.IssueContent)
	if errors.Is(err, store.ErrNoSegment) {
		return 0, bad("segment: segment %d no longer exists; choose another", is.Segment)
	}
	if err != nil {
		return 0, err
	}
	n, err := segs.SegmentCount(ctx, expr)
	return n.Active, err
}

// SegmentStore is the store's side of an issue with a segment: the
// store behind Service.Store keeps them (the Redis store does).
type SegmentStore interface {
	IssueSegmentExpr(ctx context.Context, c store.IssueContent) (string, error)
	SegmentCount(ctx context.Context, expr string) (store.SegmentCount, error)
}

// SendOptions are a send's safeguards.
type SendOptions struct {
	// ConfirmAudience, when set, is the audience the publisher agreed
	// to: the send is refused (AudienceChangedError) when it is not that.
	ConfirmAudience *int64
	// Force sends to an audience of 0, and an issue whose HTML part is
	// over ClipBytes.
	Force bool
	// IgnoreChecks sends an issue whose pre-send checks found errors
	// (a link that answers 404): the publisher read them.
	IgnoreChecks bool
	// Version, when above 0, is the content's version the publisher saw:
	// a later edit refuses the send (store.ErrIssueStale).
	Version int
}

// Send sends the issue is (as the caller read it) now, at a time, or at
// each reader's local hour: a draft or a scheduled issue (whose schedule
// it replaces). It returns the issue after the move and the audience it
// counted. Errors: *InputError, ErrNoReaders, *ClippedError, *ChecksError,
// *AudienceChangedError, store.ErrIssueStale, a *store.StateError, or the
// store's; nothing changed then.
func (s *Service) Send(ctx context.Context, is store.Issue, when When, opt SendOptions) (store.Issue, int64, error) {
	out, rep, err := s.SendReported(ctx, is, when, opt)
	return out, rep.Audience, err
}

// SendReported is Send answering what it found and what force overrode.
func (s *Service) SendReported(ctx context.Context, is store.Issue, when When, opt SendOptions) (store.Issue, SendReport, error) {
	var rep SendReport
	sc, err := when.check(s.now())
	if err != nil {
		return is, rep, err
	}
	if is.Status != store.IssueDraft && is.Status != store.IssueScheduled {
		return is, rep, &store.StateError{ID: is.ID, Status: is.Status}
	}
	if s.BulkReady != nil {
		if err := s.BulkReady(ctx); err != nil {
			return is, rep, err
		}
	}
	n, err := s.Audience(ctx, is)
	if err != nil {
		return is, rep, err
	}
	rep.Audience = n
	switch {
	case opt.ConfirmAudience != nil && *opt.ConfirmAudience != n:
		return is, rep, &AudienceChangedError{Confirmed: *opt.ConfirmAudience, Now: n}
	case n == 0 && !opt.Force:
		return is, rep, ErrNoReaders
	case n == 0:
		rep.Overridden = append(rep.Overridden, OverrideNoReaders)
	}
	if err := s.checkSize(ctx, is, opt.Force, &rep); err != nil {
		return is, rep, err
	}
	if err := s.preSend(ctx, is, opt.IgnoreChecks, &rep); err != nil {
		return is, rep, err
	}
	// A draft's round has never been planned (a move back to draft
	// starts a new one); a scheduled issue's plan is replaced by a new
	// round's.
	out, err := s.move(ctx, is, []string{is.Status}, sc.to, is.Status == store.IssueScheduled, sc, opt.Version)
	return out, rep, err
}

// Reschedule gives a scheduled issue (or one paused while scheduled) a
// new time, or a local hour: it is scheduled again, with a new plan; the
// old plan (and a local-hour send's held batches) does nothing when its
// time comes.
func (s *Service) Reschedule(ctx context.Context, is store.Issue, when When) (store.Issue, error) {
	if when.At == "" && when.LocalTime == "" {
		return is, bad("give at or local_time; to send now, send")
	}
	sc, err := when.check(s.now())
	if err != nil {
		return is, err
	}
	if !scheduledOrPausedScheduled(is) {
		return is, &store.StateError{ID: is.ID, Status: is.Status}
	}
	return s.move(ctx, is, []string{is.Status}, sc.to, true, sc, 0)
}

// Unschedule takes a scheduled issue (or one paused while scheduled)
// back to a draft: its plan does nothing when its time comes.
func (s *Service) Unschedule(ctx context.Context, is store.Issue) (store.Issue, error) {
	if !scheduledOrPausedScheduled(is) {
		return is, &store.StateError{ID: is.ID, Status: is.Status}
	}
	ch := store.IssueChange{Round: is.Round, NewRound: true, SetSchedule: true}
	return s.Store.TransitionIssue(ctx, is.ID, []string{is.Status}, store.IssueDraft, ch)
}

func scheduledOrPausedScheduled(is store.Issue) bool {
	return is.Status == store.IssueScheduled || (is.Status == store.IssuePaused && is.PausedFrom == store.IssueScheduled)
}

// Pause stops a scheduled or sending issue where it is: batches in
// flight stop before their next mail, held ones do nothing when due.
func (s *Service) Pause(ctx context.Context, is store.Issue) (store.Issue, error) {
	if is.Status != store.IssueScheduled && is.Status != store.IssueSending {
		return is, &store.StateError{ID: is.ID, Status: is.Status}
	}
	// From either: the script records the status it actually left, so a
	// scheduled issue whose time came since it was read is paused as
	// sending, not refused.
	return s.Store.TransitionIssue(ctx, is.ID, []string{store.IssueScheduled, store.IssueSending}, store.IssuePaused, store.IssueChange{})
}

// Resume puts a paused issue back exactly where it was: scheduled for
// its time (or at once, when that passed while it was paused), or
// sending, local hours kept. It plans again in a new round; the delivery
// marks skip whoever already got it.
func (s *Service) Resume(ctx context.Context, is store.Issue) (store.Issue, error) {
	if is.Status != store.IssuePaused {
		return is, &store.StateError{ID: is.ID, Status: is.Status}
	}
	now := s.now()
	sc := schedule{to: store.IssueSending, due: now, sendAt: is.SendAt, localTime: is.LocalTime}
	// An issue paused before pauses recorded where they came from: one
	// whose time is still ahead was paused while scheduled.
	if is.PausedFrom == store.IssueScheduled || (is.PausedFrom == "" && is.SendAt.After(now)) {
		sc.to = store.IssueScheduled
		if is.SendAt.After(now) {
			sc.due = ceilSecond(is.SendAt)
		}
	}
	return s.move(ctx, is, []string{store.IssuePaused}, sc.to, true, sc, 0)
}

// Cancel ends the issue for good: nobody gets it from now on.
func (s *Service) Cancel(ctx context.Context, is store.Issue) (store.Issue, error) {
	from := []string{store.IssueDraft, store.IssueScheduled, store.IssueSending, store.IssuePaused}
	if !slices.Contains(from, is.Status) {
		return is, &store.StateError{ID: is.ID, Status: is.Status}
	}
	// From any of them, whatever moved since it was read: a cancel plans
	// nothing, so no round need match.
	return s.Store.TransitionIssue(ctx, is.ID, from, store.IssueCancelled, store.IssueChange{})
}

// move makes a move that plans: the status, the schedule and the plan's
// outbox entry in one store step, against the round the caller read;
// then it dispatches the plan. A failed enqueue is no failure: the entry
// stays and the relay enqueues it.
func (s *Service) move(ctx context.Context, is store.Issue, from []string, to string, newRound bool, sc schedule, version int) (store.Issue, error) {
	round := is.Round
	if newRound {
		round++
	}
	job := tasks.NewIssuePlan(is.ID, round, sc.due)
	ch := store.IssueChange{Round: is.Round, NewRound: newRound, Version: version, Outbox: job.Outbox(),
		SetSchedule: true, SendAt: sc.sendAt, LocalTime: sc.localTime}
	out, err := s.Store.TransitionIssue(ctx, is.ID, from, to, ch)
	if err != nil {
		return is, err
	}
	if _, err := s.Jobs.Dispatch(ctx, job); err != nil {
		s.log().Warn("issue: plan not queued now; the relay queues it from the outbox", "issue", is.ID, "err", err)
	}
	return out, nil
}

// Actions are the moves of an issue besides a send and an edit, each a
// route (POST /api/issues/{id}/<action>) and a console button.
var Actions = []string{"pause", "resume", "reschedule", "unschedule", "cancel"}

// Allowed tells which of the moves the issue's status allows now: what a
// page offers (a send is "send").
func Allowed(is store.Issue) map[string]bool {
	st := is.Status
	return map[string]bool{
		"edit":       store.Editable(st),
		"send":       st == store.IssueDraft || st == store.IssueScheduled,
		"pause":      st == store.IssueScheduled || st == store.IssueSending,
		"resume":     st == store.IssuePaused,
		"reschedule": scheduledOrPausedScheduled(is),
		"unschedule": scheduledOrPausedScheduled(is),
		"cancel":     st == store.IssueDraft || st == store.IssueScheduled || st == store.IssueSending || st == store.IssuePaused,
	}
}
