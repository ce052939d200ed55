package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/segment"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/services/webhooks"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// DefaultIssueCheckInterval is how often a running batch looks at its
// issue's status again: a pause or cancel stops every batch's sending
// within about that long, at any send rate. Batches that start after it
// look before their first mail. Checking by time rather than every so many
// mails keeps the look cheap at a high rate (a batch of 50 takes well
// under a second there and seldom looks more than once) and still prompt
// at a low one.
const DefaultIssueCheckInterval = time.Second

// IssueStore is what sending an issue needs of the store.
type IssueStore interface {
	Issue(ctx context.Context, id int64) (store.Issue, error)
	IssueStatus(ctx context.Context, id int64) (store.IssueStatus, error)
	IssueProgress(ctx context.Context, id int64) (store.IssueProgress, error)
	TransitionIssue(ctx context.Context, id int64, from []string, to string, ch store.IssueChange) (store.Issue, error)
	RecordLocalSpan(ctx context.Context, id int64, round int, first, last time.Time) error
	AdvanceIssuePlan(ctx context.Context, id int64, round int, walk string, cursor int64, n int, done bool) error
	FinishIssue(ctx context.Context, id int64) (bool, error)
	AudienceAfter(ctx context.Context, topic string, cursor int64, limit int) ([]int64, error)
	AudienceByShard(ctx context.Context, topics []string, after int64, limit int) ([]int64, error)
	// An issue with a segment walks the segment's readers instead.
	IssueSegmentExpr(ctx context.Context, c store.IssueContent) (string, error)
	SegmentAudienceByShard(ctx context.Context, expr string, after int64, limit int) ([]int64, error)
	SubscribersByID(ctx context.Context, ids []int64) ([]store.Subscriber, error)
	ChannelsOf(ctx context.Context, ids []int64) ([]store.Channels, error)
	SetOutcome(ctx context.Context, period, outcome string, ids ...int64) error
	// SetIssueLinks stores the targets of the issue's counted links
	// (internal/engage), before the first mail that carries them.
	SetIssueLinks(ctx context.Context, issueID int64, urls []string) error
}

// IssueSender handles issue:plan and email:issue: an issue's audience
// walked as the digest's is (the same back pressure, batches, delivery
// marks and shared render), with a status check that lets a pause stop
// it and a resume carry on.
type IssueSender struct {
	Store   IssueStore
	Deliver *Deliverer
	Queue   tasks.Enqueuer
	Depth   QueueDepth
	Links   Links
	Quiet   *quiet.Hours
	Now     func() time.Time
	Log     *slog.Logger
	Metrics *Metrics
	// DefaultZone is the time zone of readers without one, for local-hour
	// sending (nil: UTC).
	DefaultZone       *time.Location
	BatchSize         int
	MaxPendingBatches int
	// CheckInterval is how often a batch reads its issue's status
	// again while it sends (DefaultIssueCheckInterval).
	CheckInterval time.Duration
	// Notify queues issue.sent when an issue's sending ends (nil: none).
	Notify *webhooks.Notifier

	prepMu   sync.Mutex
	prepared map[preparedKey]preparedIssue
	// contents are the issues' contents by id and version, for batches:
	// what a batch uses of an issue (its content, slug, period) changes
	// only with its version, so a batch reads the small status and the
	// whole issue only when its version is new to the worker.
	contents map[issueVersion]store.Issue
	// linksStored are the issue versions whose counted links this worker
	// stored (SetIssueLinks), under prepMu.
	linksStored map[issueVersion]bool
}

// issueVersion names one version of an issue's content.
type issueVersion struct {
	id      int64
	version int
}

// preparedKey names an issue's mail to one topic's readers: the version
// is part of it, since only a sent issue is frozen.
type preparedKey struct {
	id      int64
	version int
	topic   string
}

// preparedIssue is that mail's shared data and rendering.
type preparedIssue struct {
	data mailer.Data
	prep *mailer.Prepared
	// links are the targets of the body's counted links by index; nil
	// when links are not counted (NEWSLETTER_ENGAGEMENT=off).
	links []string
}

// maxPrepared bounds the cache: a worker sends a few issues at a time.
const maxPrepared = 64

// issue reads the issue, waiting out an outage.
func (h *IssueSender) issue(ctx context.Context, id int64) (store.Issue, error) {
	return h.Store.Issue(ctx, id)
}

// status reads the issue's status, round and version, waiting out an
// outage.
func (h *IssueSender) status(ctx context.Context, id int64) (store.IssueStatus, error) {
	return h.Store.IssueStatus(ctx, id)
}

// content is the issue at st (its status and round from st), read whole
// only the first time the worker meets this version of it.
func (h *IssueSender) content(ctx context.Context, id int64, st store.IssueStatus) (store.Issue, error) {
	key := issueVersion{id, st.Version}
	h.prepMu.Lock()
	is, ok := h.contents[key]
	h.prepMu.Unlock()
	if !ok {
		var err error
		if is, err = h.issue(ctx, id); err != nil {
			return store.Issue{}, err
		}
		h.prepMu.Lock()
		if h.contents == nil || len(h.contents) >= maxPrepared {
			h.contents = map[issueVersion]store.Issue{}
		}
		h.contents[issueVersion{id, is.Version}] = is
		h.prepMu.Unlock()
	}
	is.Status, is.Round = st.Status, st.Round
	return is, nil
}

// HandleIssuePlan walks the readers of any of the issue's topics (each
// once) and enqueues their batches: due now, or at the issue's local hour
// in each reader's time zone. The walk goes shard by shard, so that a
// batch's readers sit in one or two of the store's shards and its
// per-shard steps run once or twice, not for nearly every shard (an
// issue an earlier release began walks on in id order: walkOrder). The
// cursor is saved after each page, so a killed planner resumes; a paused
// or cancelled issue stops the walk.
func (h *IssueSender) HandleIssuePlan(ctx context.Context, p tasks.IssuePlanPayload) error {
	size := h.BatchSize
	room := backPressure{depth: h.Depth, limit: h.MaxPendingBatches}
	prog, err := h.Store.IssueProgress(ctx, p.IssueID)
	if errors.Is(err, store.ErrNoIssue) {
		return fmt.Errorf("issue %d: %w", p.IssueID, asynq.SkipRetry)
	}
	if err != nil {
		return err
	}
	if prog.Round != p.Round || prog.PlanDone {
		return nil // a later round plans it, or this one is done
	}
	cursor, maxCursor := prog.Cursor, prog.MaxCursor
	fannedOut := false
	var is store.Issue
	order := prog.WalkOf()
	walk := h.walkOrder(ctx, order, size, func() store.Issue { return is })
	for {
		var again bool
		var err error
		if is, again, err = h.planningIssue(ctx, p, is); err != nil {
			return err
		}
		if again {
			continue
		}
		if !planning(is) || is.Round != p.Round {
			h.Log.Info("issue: planning stopped", "issue", is.ID, "status", is.Status)
			return nil
		}
		if !fannedOut && is.Status == store.IssueSending {
			// The readers' browsers, in the push lane (fanout.go).
			if err := h.fanOutPush(ctx, is, p.Round); err != nil {
				return err
			}
			fannedOut = true
		}
		if err := room.wait(ctx); err != nil {
			return err
		}
		ids, err := walk.next(cursor)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			if err := h.advance(ctx, is.ID, p.Round, order, cursor, 0, true); err != nil {
				return err
			}
			return h.finishPlan(ctx, is, p.Round)
		}
		if err := h.enqueuePage(ctx, is, p.Round, ids); err != nil {
			return err
		}
		n := countAbove(ids, walk.key, maxCursor)
		last := walk.key(ids[len(ids)-1])
		cursor, maxCursor = last, max(maxCursor, last)
		if err := h.advance(ctx, is.ID, p.Round, order, cursor, n, false); err != nil {
			return err
		}
	}
}

// planningIssue reads the issue before the planner's next page: the
// whole issue once, then its status alone before each page (while it is
// sending in this round its content and schedule stay as read; a resume
// starts a new round). A scheduled issue whose time came is moved to
// sending here; again says another run moved it first (or changed it),
// and the issue is to be read again.
func (h *IssueSender) planningIssue(ctx context.Context, p tasks.IssuePlanPayload, is store.Issue) (_ store.Issue, again bool, err error) {
	if is.ID == 0 || !planning(is) {
		is, err = h.issue(ctx, p.IssueID)
	} else {
		var st store.IssueStatus
		st, err = h.status(ctx, p.IssueID)
		is.Status, is.Round = st.Status, st.Round
	}
	if err != nil {
		return is, false, err
	}
	if is.Status == store.IssueScheduled && is.LocalTime == "" && is.Round == p.Round {
		// Never before its time: asynq keeps due times in whole
		// seconds, and a relay or a clock apart can start a plan
		// early. It comes back when the time is there.
		if early := is.SendAt.Sub(h.Now()); early > 0 {
			return is, false, notYetError{early}
		}
		// Its time came: from now on it is frozen.
		if is, err = h.Store.TransitionIssue(ctx, p.IssueID, []string{store.IssueScheduled}, store.IssueSending,
			store.IssueChange{Round: p.Round}); errors.Is(err, store.ErrIssueState) || errors.Is(err, store.ErrIssueStale) {
			return is, true, nil
		} else if err != nil {
			return is, false, err
		}
	}
	return is, false, nil
}

// planning says the planner walks is's readers: it is sending, or a
// local-hour send waiting, scheduled, for its first reader's hour (its
// batches are held to each reader's hour; the first due moves it to
// sending).
func planning(is store.Issue) bool {
	return is.Status == store.IssueSending || (is.Status == store.IssueScheduled && is.LocalTime != "")
}

// finishPlan ends a walk: a sending issue is sent once everyone planned
// is done. A local-hour send that planned nobody (sent with force to an
// audience of 0) has no batch to move it to sending: it moves here.
func (h *IssueSender) finishPlan(ctx context.Context, is store.Issue, round int) error {
	if is.Status == store.IssueScheduled {
		prog, err := h.Store.IssueProgress(ctx, is.ID)
		if err != nil || prog.Planned > 0 {
			return err
		}
		is, err = h.Store.TransitionIssue(ctx, is.ID, []string{store.IssueScheduled}, store.IssueSending, store.IssueChange{Round: round})
		if errors.Is(err, store.ErrIssueState) || errors.Is(err, store.ErrIssueStale) {
			return nil // moved since: its own move plans or sends it
		}
		if err != nil {
			return err
		}
	}
	return h.finish(ctx, is)
}

// enqueuePage queues the batches of one page of readers ids: due now, or
// at the issue's local hour in each reader's time zone (the span of those
// hours recorded for the issue's page).
func (h *IssueSender) enqueuePage(ctx context.Context, is store.Issue, round int, ids []int64) error {
	due := map[time.Time][]int64{{}: ids}
	if is.LocalTime != "" {
		var err error
		if due, err = h.byLocalTime(ctx, is.LocalTime, ids); err != nil {
			return err
		}
		if err := h.recordSpan(ctx, is.ID, round, due); err != nil {
			return err
		}
	}
	for at, part := range due {
		task := tasks.NewIssueBatch(is.ID, round, part, h.Now(), false)
		if !at.IsZero() {
			task = tasks.NewIssueBatch(is.ID, round, part, at, true)
		}
		if err := enqueueOnce(ctx, h.Queue, task); err != nil {
			return err
		}
	}
	return nil
}

// recordSpan widens the issue's span of local hours by a page's (the
// zero time, due now, is now).
func (h *IssueSender) recordSpan(ctx context.Context, id int64, round int, due map[time.Time][]int64) error {
	var first, last time.Time
	for at := range due {
		if at.IsZero() {
			at = h.Now()
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return h.Store.RecordLocalSpan(ctx, id, round, first, last)
}

// walkOrder is the planner's walk in order (store.WalkByShard, or
// store.WalkByID for an issue an earlier release began), over the topics
// topics gives when it reads (the issue is read after the walk is made).
func (h *IssueSender) walkOrder(ctx context.Context, order string, page int, issue func() store.Issue) lookahead {
	if order == store.WalkByID {
		return lookahead{page: page, read: func(cursor int64, limit int) ([]int64, error) {
			return h.audienceAny(ctx, issue().Topics, cursor, limit)
		}}
	}
	// A segment's expression is read once a run of the planner: an edit
	// of the segment while it sends reaches the pages planned after it.
	var segExpr string
	return lookahead{page: page, key: store.WalkKey, read: func(cursor int64, limit int) ([]int64, error) {
		is := issue()
		if is.Segment == 0 {
			return h.Store.AudienceByShard(ctx, is.Topics, cursor, limit)
		}
		if segExpr == "" {
			var err error
			segExpr, err = h.Store.IssueSegmentExpr(ctx, is.IssueContent)
			if errors.Is(err, store.ErrNoSegment) {
				// The API refuses to delete a segment an unsent issue
				// names; one gone anyway leaves nobody to plan for.
				return nil, fmt.Errorf("issue %d: %w: %w", is.ID, err, asynq.SkipRetry)
			}
			if err != nil {
				return nil, err
			}
		}
		ids, err := h.Store.SegmentAudienceByShard(ctx, segExpr, cursor, limit)
		var bad *segment.Error
		if errors.As(err, &bad) {
			// The expression no longer holds (a topic gone from the
			// topics file): a retry would find it as wrong.
			return nil, fmt.Errorf("issue %d: its segment: %w: %w", is.ID, err, asynq.SkipRetry)
		}
		return ids, err
	}}
}

// countAbove is how many of ids are past cursor in the walk (key): by
// how much a page grows the issue's planned count, so that readers
// planned by an earlier walk (a killed planner, an earlier round) are
// not counted twice.
func countAbove(ids []int64, key func(int64) int64, cursor int64) int {
	n := 0
	for _, id := range ids {
		if key(id) > cursor {
			n++
		}
	}
	return n
}

// advance saves the planner's place after a page, waiting out an outage
// (the store counts a page once, so saving it again is safe).
func (h *IssueSender) advance(ctx context.Context, id int64, round int, walk string, cursor int64, n int, done bool) error {
	return h.Store.AdvanceIssuePlan(ctx, id, round, walk, cursor, n, done)
}

// audienceAny is the keyset walk over the union of topics' audiences: up
// to limit ids above cursor of active readers of any of them, each once.
// Every id up to the smallest last id of a full page is in the pages read,
// so cutting there misses nobody.
func (h *IssueSender) audienceAny(ctx context.Context, topicIDs []string, cursor int64, limit int) ([]int64, error) {
	return audienceAny(ctx, h.Store, topicIDs, cursor, limit)
}

// LookaheadPages is how many pages a lookahead reads at once.
const LookaheadPages = 10

// lookahead reads a walk several pages at a time and hands them out a page
// at a time: a read of the sharded store's bitmaps costs a round trip of
// one GETRANGE per shard and bitmap however long the stretch, so ten
// pages cost what one did. A page handed out is the one a read at its
// cursor would have given when the pages were read; readers who join or
// leave meanwhile are as for any two reads (the batches check each
// reader as they send). It lives for one run of the planner's task.
type lookahead struct {
	// read gives up to limit ids past cursor, in the walk's order.
	read func(cursor int64, limit int) ([]int64, error)
	// key is an id's place in the walk's order, which cursors are
	// (store.WalkKey); nil: id order, the id itself.
	key  func(id int64) int64
	page int
	buf  []int64
	end  bool // the last read reached the walk's end
}

// next is the page after cursor.
func (l *lookahead) next(cursor int64) ([]int64, error) {
	if l.key == nil {
		l.key = func(id int64) int64 { return id }
	}
	i, _ := slices.BinarySearchFunc(l.buf, cursor+1, func(id, target int64) int { return cmp.Compare(l.key(id), target) })
	l.buf = l.buf[i:]
	if len(l.buf) < l.page && !l.end {
		ids, err := l.read(cursor, l.page*LookaheadPages)
		if err != nil {
			return nil, err
		}
		l.buf, l.end = ids, len(ids) < l.page*LookaheadPages
	}
	return l.buf[:min(len(l.buf), l.page)], nil
}

// audienceReader reads one page of a topic's audience.
type audienceReader interface {
	AudienceAfter(ctx context.Context, topic string, cursor int64, limit int) ([]int64, error)
}

// audienceAny is IssueSender.audienceAny for any reader of audiences (the
// fan-out walks an issue's readers the same way).
func audienceAny(ctx context.Context, s audienceReader, topicIDs []string, cursor int64, limit int) ([]int64, error) {
	var all []int64
	cut := int64(math.MaxInt64)
	for _, tp := range topicIDs {
		ids, err := s.AudienceAfter(ctx, tp, cursor, limit)
		if err != nil {
			return nil, err
		}
		all = append(all, ids...)
		if len(ids) == limit {
			cut = min(cut, ids[len(ids)-1])
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	end, _ := slices.BinarySearch(all, cut+1)
	if cut == math.MaxInt64 {
		end = len(all)
	}
	all = all[:end]
	return all[:min(len(all), limit)], nil
}

// LocalDue is the next time at or after now that is hhmm in zone tz
// (def when tz is empty or unknown).
func LocalDue(now time.Time, hhmm, tz string, def *time.Location) (time.Time, error) {
	at, err := time.Parse("15:04", hhmm)
	if err != nil {
		return time.Time{}, fmt.Errorf("local time %q: want HH:MM", hhmm)
	}
	loc := def
	if loc == nil {
		loc = time.UTC
	}
	if tz != "" {
		if l, err := time.LoadLocation(tz); err == nil {
			loc = l
		}
	}
	n := now.In(loc)
	due := time.Date(n.Year(), n.Month(), n.Day(), at.Hour(), at.Minute(), 0, 0, loc)
	if due.Before(n) {
		due = time.Date(n.Year(), n.Month(), n.Day()+1, at.Hour(), at.Minute(), 0, 0, loc)
	}
	return due.UTC(), nil
}

// byLocalTime groups a page by the time each reader is due. A time not
// later than now is sent now (the zero key).
func (h *IssueSender) byLocalTime(ctx context.Context, hhmm string, ids []int64) (map[time.Time][]int64, error) {
	subs, err := h.Store.SubscribersByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	now := h.Now()
	out := map[time.Time][]int64{}
	for i, s := range subs {
		due, err := LocalDue(now, hhmm, s.Timezone, h.DefaultZone)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, asynq.SkipRetry)
		}
		if !due.After(now) {
			due = time.Time{}
		}
		out[due] = append(out[due], ids[i])
	}
	return out, nil
}

// IssueData is the data every reader of topic shares: the stream's and
// the issue's, its body rendered once (body).
func IssueData(l Links, is store.Issue, topic string, body mailer.Body) mailer.Data {
	d := l.Stream(topic)
	d.Subject, d.Preheader, d.IssueHTML, d.IssueText = is.Subject, is.Preheader, body.HTML, body.Text
	d.ArchiveURL = l.ArchiveURL(is)
	d.ReplyTo = is.ReplyTo
	return d
}

// ArchiveURL is the issue's page in the public archive ("view in the
// browser"), the same for every reader: "" when one of its topics is
// private or it went to a segment (the archive leaves it out,
// api.Server.public).
func (l Links) ArchiveURL(is store.Issue) string {
	if l.BaseURL == "" || len(is.Topics) == 0 || is.Segment != 0 {
		return ""
	}
	for _, t := range is.Topics {
		if !l.Topics.Current().Public(t) {
			return ""
		}
	}
	return l.BaseURL + "/archive/" + url.PathEscape(is.Slug)
}

// IssueTopic is the topic reader s gets issue is as by e-mail: the first
// of the issue's topics they follow and chose e-mail for (ch, their
// choices; e-mail is on by default). None: they are skipped.
//
// An issue to a segment alone goes to readers for being in the segment,
// not for a topic: it goes as "" (no topic), so its footer names no
// topic ("You receive this mail") and its unsubscribe link and
// List-Unsubscribe leave the newsletter's bulk mail, everything (leaving
// one of the reader's topics would not stop the next such issue). A
// reader who takes e-mail for none of their topics is skipped still.
func IssueTopic(is store.Issue, s store.Subscriber, ch store.Channels) (string, bool) {
	if len(is.Topics) == 0 && is.Segment != 0 {
		for _, tp := range s.Topics {
			if ch.Wants(tp, store.ChannelEmail) {
				return "", true
			}
		}
		return "", false
	}
	for _, tp := range is.Topics {
		if slices.Contains(s.Topics, tp) && ch.Wants(tp, store.ChannelEmail) {
			return tp, true
		}
	}
	return "", false
}

// notYetError is a plan that started before its issue's time: it comes
// back then (a retryAfterer, so no failure is counted).
type notYetError struct{ wait time.Duration }

func (e notYetError) Error() string { return fmt.Sprintf("the issue's time is %s away", e.wait) }

// RetryAfter implements retryAfterer: at least a second, asynq's grain.
func (e notYetError) RetryAfter() time.Duration { return max(e.wait, time.Second) }
