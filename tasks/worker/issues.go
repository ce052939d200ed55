package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/internal/quiet"
	"github.com/newsletter/newsletter/internal/webhook"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// DefaultIssueCheckEvery is how many mails a batch sends between two
// looks at its issue's status: a pause stops the sending within that many
// mails per running batch.
const DefaultIssueCheckEvery = 10

// IssueStore is what sending an issue needs of the store.
type IssueStore interface {
	Issue(ctx context.Context, id int64) (store.Issue, error)
	IssueProgress(ctx context.Context, id int64) (store.IssueProgress, error)
	TransitionIssue(ctx context.Context, id int64, from []string, to string, ch store.IssueChange) (store.Issue, error)
	AdvanceIssuePlan(ctx context.Context, id int64, round int, cursor int64, n int, done bool) error
	FinishIssue(ctx context.Context, id int64) (bool, error)
	AudienceAfter(ctx context.Context, topic string, cursor int64, limit int) ([]int64, error)
	SubscribersByID(ctx context.Context, ids []int64) ([]store.Subscriber, error)
	SetOutcome(ctx context.Context, period, outcome string, ids ...int64) error
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
	Metrics *Metrics // nil: none
	// DefaultZone is the time zone of readers without one, for local-hour
	// sending (nil: UTC).
	DefaultZone       *time.Location
	BatchSize         int
	MaxPendingBatches int
	CheckEvery        int // DefaultIssueCheckEvery
	// Notify queues issue.sent when an issue's sending ends (nil: none).
	Notify *tasks.WebhookNotifier

	bodyMu sync.Mutex
	bodies map[[2]int64]mailer.Body
}

func (h *IssueSender) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *IssueSender) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

// HandleIssuePlan walks the readers of any of the issue's topics (each
// once) and enqueues their batches: due now, or at the issue's local hour
// in each reader's time zone. The cursor is saved after each page, so a
// killed planner resumes; a paused or cancelled issue stops the walk.
func (h *IssueSender) HandleIssuePlan(ctx context.Context, t *asynq.Task) error {
	var p tasks.IssuePlanPayload
	if err := decode(t, &p); err != nil {
		return err
	}
	if p.IssueID <= 0 {
		return errMissing(t, "issue id")
	}
	size := h.BatchSize
	if size <= 0 {
		size = DefaultDigestBatch
	}
	room := &Planner{Depth: h.Depth, MaxPendingBatches: h.MaxPendingBatches}
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
	for {
		is, err := h.Store.Issue(ctx, p.IssueID)
		if err != nil {
			return err
		}
		if is.Status == store.IssueScheduled && is.Round == p.Round {
			// Its time came: from now on it is frozen.
			if is, err = h.Store.TransitionIssue(ctx, is.ID, []string{store.IssueScheduled}, store.IssueSending, store.IssueChange{}); errors.Is(err, store.ErrIssueState) {
				continue
			} else if err != nil {
				return err
			}
		}
		if is.Status != store.IssueSending || is.Round != p.Round {
			h.log().Info("issue: planning stopped", "issue", is.ID, "status", is.Status)
			return nil
		}
		if !fannedOut {
			// The readers' browsers, in the push lane (fanout.go).
			if err := h.fanOutPush(ctx, is, p.Round); err != nil {
				return err
			}
			fannedOut = true
		}
		if err := room.waitForRoom(ctx); err != nil {
			return err
		}
		ids, err := h.audienceAny(ctx, is.Topics, cursor, size)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			if err := h.Store.AdvanceIssuePlan(ctx, is.ID, p.Round, cursor, 0, true); err != nil {
				return err
			}
			return h.finish(ctx, is)
		}
		due := map[time.Time][]int64{{}: ids}
		if is.LocalTime != "" {
			if due, err = h.byLocalTime(ctx, is.LocalTime, ids); err != nil {
				return err
			}
		}
		for at, part := range due {
			task := tasks.NewIssueBatch(is.ID, p.Round, part, h.now(), false)
			if !at.IsZero() {
				task = tasks.NewIssueBatch(is.ID, p.Round, part, at, true)
			}
			if _, err := h.Queue.EnqueueContext(ctx, task); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
				return fmt.Errorf("enqueue issue batch: %w", err)
			}
		}
		n := 0
		for _, id := range ids {
			if id > maxCursor {
				n++
			}
		}
		cursor, maxCursor = ids[len(ids)-1], max(maxCursor, ids[len(ids)-1])
		if err := h.Store.AdvanceIssuePlan(ctx, is.ID, p.Round, cursor, n, false); err != nil {
			return err
		}
	}
}

// audienceAny is the keyset walk over the union of topics' audiences: up
// to limit ids above cursor of active readers of any of them, each once.
// Every id up to the smallest last id of a full page is in the pages read,
// so cutting there misses nobody.
func (h *IssueSender) audienceAny(ctx context.Context, topicIDs []string, cursor int64, limit int) ([]int64, error) {
	return audienceAny(ctx, h.Store, topicIDs, cursor, limit)
}

// audienceAny is IssueSender.audienceAny for any reader of audiences (the
// fan-out walks an issue's readers the same way).
func audienceAny(ctx context.Context, s interface {
	AudienceAfter(ctx context.Context, topic string, cursor int64, limit int) ([]int64, error)
}, topicIDs []string, cursor int64, limit int) ([]int64, error) {
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
	now := h.now()
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
	return d
}

// ArchiveURL is the issue's page in the public archive ("view in the
// browser"), the same for every reader: "" when one of its topics is
// private (the archive leaves it out, api.Server.public).
func (l Links) ArchiveURL(is store.Issue) string {
	if l.BaseURL == "" || len(is.Topics) == 0 {
		return ""
	}
	for _, t := range is.Topics {
		if !l.topics().Public(t) {
			return ""
		}
	}
	return l.BaseURL + "/archive/" + url.PathEscape(is.Slug)
}

// IssueTopic is the topic a reader gets the issue as (its unsubscribe
// link leaves that one): the first of the issue's topics they have.
func IssueTopic(is store.Issue, s store.Subscriber) (string, bool) {
	for _, tp := range is.Topics {
		if slices.Contains(s.Topics, tp) {
			return tp, true
		}
	}
	return "", false
}

// body renders an issue's Markdown once per version.
func (h *IssueSender) body(is store.Issue) (mailer.Body, error) {
	h.bodyMu.Lock()
	defer h.bodyMu.Unlock()
	key := [2]int64{is.ID, int64(is.Version)}
	if b, ok := h.bodies[key]; ok {
		return b, nil
	}
	b, err := mailer.RenderMarkdown(is.Body)
	if err != nil {
		return b, err
	}
	if h.Metrics != nil {
		h.Metrics.IssueRenders.Inc()
	}
	if h.bodies == nil || len(h.bodies) > 16 {
		h.bodies = map[[2]int64]mailer.Body{}
	}
	h.bodies[key] = b
	return b, nil
}

// HandleIssueBatch sends an issue to a batch of readers, the digest
// batch's way (claims, marks, one SMTP session, quiet hours), checking
// the issue's status every CheckEvery mails: a paused or cancelled issue
// hands the rest back unsent (a resume plans them again; the marks skip
// whoever got it).
func (h *IssueSender) HandleIssueBatch(ctx context.Context, t *asynq.Task) error {
	var p tasks.IssueBatchPayload
	if err := decode(t, &p); err != nil {
		return err
	}
	if p.IssueID <= 0 || len(p.IDs) == 0 {
		return errMissing(t, "issue and recipients")
	}
	is, err := h.Store.Issue(ctx, p.IssueID)
	if errors.Is(err, store.ErrNoIssue) {
		return fmt.Errorf("issue %d: %w", p.IssueID, asynq.SkipRetry)
	}
	if err != nil {
		return err
	}
	if is.Status != store.IssueSending || p.Round != is.Round {
		// Paused, cancelled or done; or a batch of an earlier round: a
		// resume plans everyone its rounds had not sent again, so a held
		// batch of the round before (a local hour, quiet hours) would
		// only race the new round's batch for the same readers' marks,
		// and the loser would wait out the claim before it found them
		// sent.
		return nil
	}
	body, err := h.body(is)
	if err != nil {
		return fmt.Errorf("render issue %d: %v: %w", is.ID, err, asynq.SkipRetry)
	}
	subs, err := h.Store.SubscribersByID(ctx, p.IDs)
	if err != nil {
		return err
	}
	outcomes := store.IssueOutcomeKey(is.ID)
	key := strconv.FormatInt(is.ID, 10)
	prepared := map[string]*mailer.Prepared{}
	streams := map[string]mailer.Data{}
	now := h.now()
	var skipped []int64
	var mails []Mail
	held := map[time.Time][]int64{}
	for i, s := range subs {
		topic, has := IssueTopic(is, s)
		switch until := h.Quiet.Until(s.Timezone, now); {
		case s.ID == 0 || s.Status != store.Active || !has:
			skipped = append(skipped, p.IDs[i])
		case !until.IsZero():
			held[until] = append(held[until], s.ID)
		default:
			prep, ok := prepared[topic]
			if !ok {
				streams[topic] = IssueData(h.Links, is, topic, body)
				if prep, err = h.Deliver.Render.Prepare(mailer.KindIssue, streams[topic]); err != nil {
					return fmt.Errorf("prepare issue: %v: %w", err, asynq.SkipRetry)
				}
				prepared[topic] = prep
			}
			mails = append(mails, Mail{
				To:       s,
				Mark:     store.Mark{Kind: store.IssueMarkKind, Key: key, SubscriberID: s.ID, Shared: true},
				Data:     h.Links.To(streams[topic], s, topic),
				Prepared: prep,
			})
		}
	}
	if len(skipped) > 0 {
		if err := h.Store.SetOutcome(ctx, outcomes, store.OutcomeSkipped, skipped...); err != nil {
			return err
		}
	}
	for until, ids := range held {
		if _, err := h.Queue.EnqueueContext(ctx, tasks.NewIssueBatch(is.ID, p.Round, ids, until, true)); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
			return fmt.Errorf("defer quiet recipients: %w", err)
		}
	}
	every := h.CheckEvery
	if every <= 0 {
		every = DefaultIssueCheckEvery
	}
	var retry error
	for start := 0; start < len(mails); start += every {
		if start > 0 {
			cur, err := h.Store.Issue(ctx, is.ID)
			if err != nil {
				return firstErr(retry, err)
			}
			if cur.Status != store.IssueSending {
				h.log().Info("issue: batch stopped", "issue", is.ID, "status", cur.Status, "unsent", len(mails)-start)
				return retry
			}
		}
		chunk := mails[start:min(start+every, len(mails))]
		failed, err := h.Deliver.Deliver(ctx, chunk)
		retry = firstErr(retry, err)
		if len(failed) > 0 {
			ids := make([]int64, len(failed))
			for i, f := range failed {
				ids[i] = f.SubscriberID
			}
			if err := h.Store.SetOutcome(ctx, outcomes, store.OutcomeFailed, ids...); err != nil {
				return firstErr(retry, fmt.Errorf("record %d failed recipients: %w", len(ids), err))
			}
		}
	}
	if retry != nil {
		return retry
	}
	return h.finish(ctx, is)
}

// finish marks the issue sent once every planned reader is done, and
// tells the webhook endpoints that asked (issue.sent) the one time it
// does.
func (h *IssueSender) finish(ctx context.Context, is store.Issue) error {
	done, err := h.Store.FinishIssue(ctx, is.ID)
	if err != nil || !done {
		return err
	}
	h.Notify.NotifyLogged(ctx, webhook.IssueSentEvent(webhook.Issue{ID: is.ID, Slug: is.Slug, Subject: is.Subject, Topics: is.Topics}, h.now()))
	return nil
}
