package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

// DefaultRedisWait is how long a task's Redis step (pacing, claims, marks,
// the re-read, a schedule) waits for a Redis that cannot be reached before
// it gives up: longer than a restart or a Sentinel failover takes, and
// shorter than asynq's lease on the task (30 s from its last heartbeat, and
// the heartbeats stop with Redis).
//
// A task that gave up at once used to hand itself back to asynq while
// asynq could not record that either: the hand-back was lost, and the task
// ran again only when asynq's recoverer found its lease expired, a minute
// or two after Redis was back. Waiting in place, the task carries on within
// a second of Redis coming back, holding its claims and its place in the
// send rate; asynq renews its lease at the next heartbeat.
const DefaultRedisWait = 30 * time.Second

// redisWait is how one component waits out an unreachable Redis.
type redisWait struct {
	// For bounds the wait (DefaultRedisWait when zero).
	For time.Duration
	Log *slog.Logger
}

// awaitRedis runs op and, while it fails because Redis cannot be reached
// (store.Unavailable), runs it again, backing off from 50 ms to 1 s, until
// w.For has passed or ctx is done; it then returns op's last result. Every
// op it runs must be safe to run twice: a command that reached Redis just
// before the connection broke is sent again. what names the step in the
// log.
func awaitRedis[T any](ctx context.Context, w redisWait, what string, op func(context.Context) (T, error)) (T, error) {
	bound := w.For
	if bound <= 0 {
		bound = DefaultRedisWait
	}
	giveUp := time.Now().Add(bound)
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		v, err := op(ctx)
		if err == nil && attempt > 1 {
			w.Log.Info("Redis is back: "+what+" goes on", "attempts", attempt)
		}
		if err == nil || !store.Unavailable(err) || ctx.Err() != nil || time.Now().Add(wait).After(giveUp) {
			if err != nil && attempt > 1 {
				w.Log.Warn("Redis still away: "+what+" gives up", "attempts", attempt, "err", err)
			}
			return v, err
		}
		if attempt == 1 {
			w.Log.Warn("Redis away: "+what+" waits for it", "up_to", bound, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// untilRedis is awaitRedis for an op with no result.
func untilRedis(ctx context.Context, w redisWait, what string, op func(context.Context) error) error {
	_, err := awaitRedis(ctx, w, what, func(ctx context.Context) (struct{}, error) { return struct{}{}, op(ctx) })
	return err
}

// The await* types below are the handlers' stores, pacers and queues as
// their tasks use them: each method is the wrapped one, run through
// awaitRedis under the wrapper's redisWait and named for the log by the
// step it is in that handler. A handler takes its wrapper (awaited) for
// the calls that wait and calls the wrapped value plainly for the few that
// must not (a release in passing, say). Every wrapped call is one that is
// safe to run twice (awaitRedis).

// awaitQueue queues tasks waiting out an unreachable Redis.
type awaitQueue struct {
	q tasks.Enqueuer
	w redisWait
}

// Enqueue queues task, waiting out an unreachable Redis. Every task the
// worker queues has a TaskID, so sending it again after an answer lost
// with the connection is safe, and the asynq.ErrTaskIDConflict it then
// gets means an earlier attempt (or an earlier run of the handler) queued
// it: success, not an error.
func (a awaitQueue) Enqueue(ctx context.Context, task *asynq.Task, opts ...asynq.Option) error {
	_, err := awaitRedis(ctx, a.w, "enqueue of "+task.Type(), func(ctx context.Context) (*asynq.TaskInfo, error) {
		return a.q.EnqueueContext(ctx, task, opts...)
	})
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue %s: %w", task.Type(), err)
	}
	return nil
}

// awaitMarks is store.Marks waiting out an unreachable Redis: the
// delivery's claims and marks, and the mark writer's.
type awaitMarks struct {
	s store.Marks
	w redisWait
}

func (a awaitMarks) ClaimMarks(ctx context.Context, owner string, marks []store.Mark, ttl time.Duration) ([]store.Claim, error) {
	return awaitRedis(ctx, a.w, "delivery claims", func(ctx context.Context) ([]store.Claim, error) {
		return a.s.ClaimMarks(ctx, owner, marks, ttl)
	})
}

func (a awaitMarks) MarkSent(ctx context.Context, marks ...store.Mark) error {
	what := "sent mark"
	if len(marks) != 1 {
		what = fmt.Sprintf("%d sent marks", len(marks))
	}
	return untilRedis(ctx, a.w, what, func(ctx context.Context) error { return a.s.MarkSent(ctx, marks...) })
}

func (a awaitMarks) ReleaseMarks(ctx context.Context, marks []store.Mark) error {
	return untilRedis(ctx, a.w, "release of delivery claims", func(ctx context.Context) error { return a.s.ReleaseMarks(ctx, marks) })
}

func (a awaitMarks) SentMarks(ctx context.Context, marks []store.Mark) ([]bool, error) {
	return awaitRedis(ctx, a.w, "read of sent marks", func(ctx context.Context) ([]bool, error) { return a.s.SentMarks(ctx, marks) })
}

// awaitDelivery is the Deliverer's store waiting out an unreachable Redis.
type awaitDelivery struct {
	awaitMarks
	s DeliveryStore
}

func (a awaitDelivery) Get(ctx context.Context, email string) (store.Subscriber, error) {
	return awaitRedis(ctx, a.w, "re-read of the subscriber", func(ctx context.Context) (store.Subscriber, error) {
		return a.s.Get(ctx, email)
	})
}

func (a awaitDelivery) GetByID(ctx context.Context, id int64) (store.Subscriber, error) {
	return awaitRedis(ctx, a.w, "re-read of the subscriber", func(ctx context.Context) (store.Subscriber, error) {
		return a.s.GetByID(ctx, id)
	})
}

// awaitFeedback records feedback waiting out an unreachable Redis (the
// report's id makes a repeat count once).
type awaitFeedback struct {
	s FeedbackStore
	w redisWait
}

func (a awaitFeedback) RecordFeedback(ctx context.Context, f store.Feedback, p store.FeedbackPolicy) (store.FeedbackResult, error) {
	return awaitRedis(ctx, a.w, "feedback record", func(ctx context.Context) (store.FeedbackResult, error) {
		return a.s.RecordFeedback(ctx, f, p)
	})
}

// awaitPacer is a Pacer waiting out an unreachable Redis. Asking TakeN
// again after a lost answer may take slots twice: a little less sent that
// second, nothing sent twice.
type awaitPacer struct {
	p Pacer
	w redisWait
}

func (a awaitPacer) TakeN(ctx context.Context, n int) (int, time.Duration, error) {
	var wait time.Duration
	got, err := awaitRedis(ctx, a.w, "send rate", func(ctx context.Context) (got int, err error) {
		got, wait, err = a.p.TakeN(ctx, n)
		return got, err
	})
	return got, wait, err
}

func (a awaitPacer) DomainWait(ctx context.Context, domain string) (time.Duration, error) {
	return awaitRedis(ctx, a.w, "domain pause", func(ctx context.Context) (time.Duration, error) {
		return a.p.DomainWait(ctx, domain)
	})
}

func (a awaitPacer) Throttle(ctx context.Context, domain string, d time.Duration) error {
	return untilRedis(ctx, a.w, "domain pause", func(ctx context.Context) error { return a.p.Throttle(ctx, domain, d) })
}

// awaitPush is the push sender's store waiting out an unreachable Redis.
type awaitPush struct {
	s PushStore
	w redisWait
}

func (a awaitPush) GetByID(ctx context.Context, id int64) (store.Subscriber, error) {
	return awaitRedis(ctx, a.w, "re-read of the subscriber", func(ctx context.Context) (store.Subscriber, error) {
		return a.s.GetByID(ctx, id)
	})
}

func (a awaitPush) PushSubscriptions(ctx context.Context, id int64) ([]store.PushSubscription, error) {
	return awaitRedis(ctx, a.w, "read of the browsers", func(ctx context.Context) ([]store.PushSubscription, error) {
		return a.s.PushSubscriptions(ctx, id)
	})
}

func (a awaitPush) DevicesOf(ctx context.Context, ids []int64) ([][]store.Device, error) {
	return awaitRedis(ctx, a.w, "read of the devices", func(ctx context.Context) ([][]store.Device, error) {
		return a.s.DevicesOf(ctx, ids)
	})
}

func (a awaitPush) ClaimMarks(ctx context.Context, owner string, marks []store.Mark, ttl time.Duration) ([]store.Claim, error) {
	return awaitRedis(ctx, a.w, "push claims", func(ctx context.Context) ([]store.Claim, error) {
		return a.s.ClaimMarks(ctx, owner, marks, ttl)
	})
}

func (a awaitPush) MarkSent(ctx context.Context, marks ...store.Mark) error {
	return untilRedis(ctx, a.w, "push mark", func(ctx context.Context) error { return a.s.MarkSent(ctx, marks...) })
}

// awaitSequence is a sequence step's reads and queue waiting out an
// unreachable Redis.
type awaitSequence struct {
	awaitQueue
	marks   store.Marks
	digests RecentDigests
}

func (a awaitSequence) SentMarks(ctx context.Context, marks []store.Mark) ([]bool, error) {
	return awaitRedis(ctx, a.w, "read of sequence progress", func(ctx context.Context) ([]bool, error) {
		return a.marks.SentMarks(ctx, marks)
	})
}

func (a awaitSequence) LatestDigestPeriod(ctx context.Context) (string, error) {
	return awaitRedis(ctx, a.w, "read of the latest digest", a.digests.LatestDigestPeriod)
}

func (a awaitSequence) DigestItems(ctx context.Context, period string) ([]store.Item, error) {
	return awaitRedis(ctx, a.w, "read of the latest digest", func(ctx context.Context) ([]store.Item, error) {
		return a.digests.DigestItems(ctx, period)
	})
}

// awaitFanout is the fan-out's store and queue waiting out an unreachable
// Redis.
type awaitFanout struct {
	awaitQueue
	s FanoutStore
}

func (a awaitFanout) IssueStatus(ctx context.Context, id int64) (store.IssueStatus, error) {
	return awaitRedis(ctx, a.w, "read of the issue's status", func(ctx context.Context) (store.IssueStatus, error) {
		return a.s.IssueStatus(ctx, id)
	})
}

func (a awaitFanout) AudienceAfter(ctx context.Context, topic string, cursor int64, limit int) ([]int64, error) {
	return awaitRedis(ctx, a.w, "read of the audience", func(ctx context.Context) ([]int64, error) {
		return a.s.AudienceAfter(ctx, topic, cursor, limit)
	})
}

func (a awaitFanout) ChannelsOf(ctx context.Context, ids []int64) ([]store.Channels, error) {
	return awaitRedis(ctx, a.w, "read of the readers' channels", func(ctx context.Context) ([]store.Channels, error) {
		return a.s.ChannelsOf(ctx, ids)
	})
}

func (a awaitFanout) QueueInOrder(ctx context.Context, channel, key string, at time.Time, ids []int64) error {
	_, err := awaitRedis(ctx, a.w, "note of the people's order", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, a.s.QueueInOrder(ctx, channel, key, at, ids)
	})
	return err
}

func (a awaitFanout) HavePushSubscriptions(ctx context.Context, ids []int64) ([]bool, error) {
	return awaitRedis(ctx, a.w, "look for browsers", func(ctx context.Context) ([]bool, error) {
		return a.s.HavePushSubscriptions(ctx, ids)
	})
}

func (a awaitFanout) SentMarks(ctx context.Context, marks []store.Mark) ([]bool, error) {
	return awaitRedis(ctx, a.w, "read of the fan-out marks", func(ctx context.Context) ([]bool, error) {
		return a.s.SentMarks(ctx, marks)
	})
}

func (a awaitFanout) MarkSent(ctx context.Context, marks ...store.Mark) error {
	return untilRedis(ctx, a.w, "write of the fan-out marks", func(ctx context.Context) error { return a.s.MarkSent(ctx, marks...) })
}

func (a awaitFanout) EventEngagement(ctx context.Context, eventID string) (int64, error) {
	return awaitRedis(ctx, a.w, "the event's engagement id", func(ctx context.Context) (int64, error) {
		return a.s.EventEngagement(ctx, eventID)
	})
}

func (a awaitFanout) SetIssueLinks(ctx context.Context, id int64, urls []string) error {
	return untilRedis(ctx, a.w, "store the event's link", func(ctx context.Context) error { return a.s.SetIssueLinks(ctx, id, urls) })
}

func (a awaitFanout) SubscribersByID(ctx context.Context, ids []int64) ([]store.Subscriber, error) {
	return awaitRedis(ctx, a.w, "re-read of the batch", func(ctx context.Context) ([]store.Subscriber, error) {
		return a.s.SubscribersByID(ctx, ids)
	})
}

// awaitIssues is the issue sender's store and queue waiting out an
// unreachable Redis.
type awaitIssues struct {
	awaitQueue
	s IssueStore
}

func (a awaitIssues) Issue(ctx context.Context, id int64) (store.Issue, error) {
	return awaitRedis(ctx, a.w, "read of the issue", func(ctx context.Context) (store.Issue, error) {
		return a.s.Issue(ctx, id)
	})
}

func (a awaitIssues) IssueStatus(ctx context.Context, id int64) (store.IssueStatus, error) {
	return awaitRedis(ctx, a.w, "read of the issue's status", func(ctx context.Context) (store.IssueStatus, error) {
		return a.s.IssueStatus(ctx, id)
	})
}

func (a awaitIssues) IssueProgress(ctx context.Context, id int64) (store.IssueProgress, error) {
	return awaitRedis(ctx, a.w, "read of the issue's progress", func(ctx context.Context) (store.IssueProgress, error) {
		return a.s.IssueProgress(ctx, id)
	})
}

// TransitionIssue is, in the issue sender, the start of a scheduled
// issue's sending (its one transition).
func (a awaitIssues) TransitionIssue(ctx context.Context, id int64, from []string, to string, ch store.IssueChange) (store.Issue, error) {
	return awaitRedis(ctx, a.w, "start of the issue's sending", func(ctx context.Context) (store.Issue, error) {
		return a.s.TransitionIssue(ctx, id, from, to, ch)
	})
}

func (a awaitIssues) AdvanceIssuePlan(ctx context.Context, id int64, round int, walk string, cursor int64, n int, done bool) error {
	return untilRedis(ctx, a.w, "save of the issue planner's cursor", func(ctx context.Context) error {
		return a.s.AdvanceIssuePlan(ctx, id, round, walk, cursor, n, done)
	})
}

func (a awaitIssues) FinishIssue(ctx context.Context, id int64) (bool, error) {
	return awaitRedis(ctx, a.w, "end of the issue's sending", func(ctx context.Context) (bool, error) {
		return a.s.FinishIssue(ctx, id)
	})
}

func (a awaitIssues) AudienceByShard(ctx context.Context, topics []string, after int64, limit int) ([]int64, error) {
	return awaitRedis(ctx, a.w, "read of the audience", func(ctx context.Context) ([]int64, error) {
		return a.s.AudienceByShard(ctx, topics, after, limit)
	})
}

func (a awaitIssues) IssueSegmentExpr(ctx context.Context, c store.IssueContent) (string, error) {
	return awaitRedis(ctx, a.w, "read of the issue's segment", func(ctx context.Context) (string, error) {
		return a.s.IssueSegmentExpr(ctx, c)
	})
}

func (a awaitIssues) SegmentAudienceByShard(ctx context.Context, expr string, after int64, limit int) ([]int64, error) {
	return awaitRedis(ctx, a.w, "read of the segment's audience", func(ctx context.Context) ([]int64, error) {
		return a.s.SegmentAudienceByShard(ctx, expr, after, limit)
	})
}

func (a awaitIssues) AudienceAfter(ctx context.Context, topic string, cursor int64, limit int) ([]int64, error) {
	return awaitRedis(ctx, a.w, "read of the audience", func(ctx context.Context) ([]int64, error) {
		return a.s.AudienceAfter(ctx, topic, cursor, limit)
	})
}

// ChannelsOf reads the channels a batch's readers chose.
func (a awaitIssues) ChannelsOf(ctx context.Context, ids []int64) ([]store.Channels, error) {
	return awaitRedis(ctx, a.w, "read of the readers' channels", func(ctx context.Context) ([]store.Channels, error) {
		return a.s.ChannelsOf(ctx, ids)
	})
}

// SubscribersByID reads the readers of a batch, or those of a page of the
// plan (their time zones).
func (a awaitIssues) SubscribersByID(ctx context.Context, ids []int64) ([]store.Subscriber, error) {
	return awaitRedis(ctx, a.w, "read of the readers", func(ctx context.Context) ([]store.Subscriber, error) {
		return a.s.SubscribersByID(ctx, ids)
	})
}

func (a awaitIssues) SetOutcome(ctx context.Context, key, outcome string, ids ...int64) error {
	return untilRedis(ctx, a.w, "record of "+outcome+" readers", func(ctx context.Context) error {
		return a.s.SetOutcome(ctx, key, outcome, ids...)
	})
}

// awaitPlanner is the digest planner's store, the digest's issue and the
// queue waiting out an unreachable Redis (its back pressure is
// backPressure's).
type awaitPlanner struct {
	awaitQueue
	s      PlanStore
	issues DigestIssueStore
}

func (a awaitPlanner) StartDigestRun(ctx context.Context, period string) (run store.DigestRun, created bool, err error) {
	run, err = awaitRedis(ctx, a.w, "start of the digest run", func(ctx context.Context) (run store.DigestRun, err error) {
		run, created, err = a.s.StartDigestRun(ctx, period)
		return run, err
	})
	return run, created, err
}

func (a awaitPlanner) DigestIssue(ctx context.Context, period string, c store.IssueContent) (store.Issue, error) {
	return awaitRedis(ctx, a.w, "the digest's issue", func(ctx context.Context) (store.Issue, error) {
		return a.issues.DigestIssue(ctx, period, c)
	})
}

// TransitionIssue is, in the planner, the send of the digest's issue.
func (a awaitPlanner) TransitionIssue(ctx context.Context, id int64, from []string, to string, ch store.IssueChange) (store.Issue, error) {
	return awaitRedis(ctx, a.w, "send of the digest's issue", func(ctx context.Context) (store.Issue, error) {
		return a.issues.TransitionIssue(ctx, id, from, to, ch)
	})
}

// Dispatch queues job and clears it from the digest issue's outbox
// (tasks.Dispatch), the pair again while Redis cannot be reached.
func (a awaitPlanner) Dispatch(ctx context.Context, job tasks.Job) (duplicate bool, err error) {
	return awaitRedis(ctx, a.w, "enqueue of the issue's plan", func(ctx context.Context) (bool, error) {
		return tasks.Dispatch(ctx, a.q, a.issues, job)
	})
}
