package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// FeedbackType is what a bounce or complaint report says about an address.
type FeedbackType string

// The kinds of report: the one policy for every source (the bounce intake,
// each provider's webhook, the generic endpoint) is in RecordFeedback.
const (
	HardBounce FeedbackType = "hard"      // the address does not exist: bounced at once
	SoftBounce FeedbackType = "soft"      // a full mailbox, a refusal for now: counted
	Complaint  FeedbackType = "complaint" // reported as spam: complained, never mailed again
)

// Valid tells whether t is one of the three kinds.
func (t FeedbackType) Valid() bool { return t == HardBounce || t == SoftBounce || t == Complaint }

// Feedback is one bounce or complaint report about one address.
type Feedback struct {
	// ID is the report's own id (a provider's event id, a DSN's
	// Message-ID and recipient): the same report twice counts once. Empty:
	// not deduplicated.
	ID string
	// SubscriberID, when known from the mail itself (the VERP tag), finds
	// the subscriber; otherwise Email does. With both, they must agree.
	SubscriberID int64
	Email        string
	Type         FeedbackType
	// Digest counts the report against the latest digest run's bounce and
	// complaint rates: the mail it is about was a digest, or its kind is
	// unknown (most mail is digest mail).
	Digest bool
	// Issue, when above 0, is the issue the mail was (its tag names it):
	// the report counts against that issue's bounces or complaints
	// (IssueProgress), the weekly digest's issue included.
	Issue int64
}

// FeedbackPolicy is how soft bounces add up.
type FeedbackPolicy struct {
	SoftLimit  int           // soft bounces within SoftWindow that make a bounce (default 3)
	SoftWindow time.Duration // default 30 days
}

// Defaults of FeedbackPolicy.
const (
	DefaultSoftBounceLimit  = 3
	DefaultSoftBounceWindow = 30 * 24 * time.Hour
)

func (p FeedbackPolicy) withDefaults() FeedbackPolicy {
	if p.SoftLimit <= 0 {
		p.SoftLimit = DefaultSoftBounceLimit
	}
	if p.SoftWindow <= 0 {
		p.SoftWindow = DefaultSoftBounceWindow
	}
	return p
}

// FeedbackResult is what a report did.
type FeedbackResult struct {
	Subscriber Subscriber
	// Duplicate: the report was applied before; nothing changed.
	Duplicate bool
	// Changed: the subscriber's status changed (to bounced or complained).
	Changed bool
	// SoftBounces is the count within the window after a soft bounce.
	SoftBounces int
}

// Suppressions are the addresses that must not be mailed because of what
// the mail system said about them: bounced and complained.
type Suppressions interface {
	// RecordFeedback applies one report (see FeedbackType). An address the
	// store does not know is ErrNotFound; a known report is Duplicate.
	RecordFeedback(ctx context.Context, f Feedback, p FeedbackPolicy) (FeedbackResult, error)
	// Suppressed lists up to limit subscribers with status (Bounced or
	// Complained; "" for both) and an id above after, in id order.
	Suppressed(ctx context.Context, status Status, after int64, limit int) ([]Subscriber, error)
	// LiftSuppression takes an address off the list by hand: a bounced
	// address that had confirmed is active again; one that complained is
	// unsubscribed (only its own confirmation brings it back).
	// ErrNotSuppressed when it is neither.
	LiftSuppression(ctx context.Context, email string) (Subscriber, error)
}

// RecordFeedback implements Suppressions.
func (r *Redis) RecordFeedback(ctx context.Context, f Feedback, p FeedbackPolicy) (FeedbackResult, error) {
	if !f.Type.Valid() {
		return FeedbackResult{}, fmt.Errorf("feedback type %q: want hard, soft or complaint", f.Type)
	}
	if f.Email == "" && f.SubscriberID <= 0 {
		return FeedbackResult{}, errors.New("feedback names no address")
	}
	p = p.withDefaults()
	now := r.now()
	id := ""
	if f.SubscriberID > 0 {
		id = strconv.FormatInt(f.SubscriberID, 10)
	}
	res, err := feedbackScript.Run(ctx, r.rdb, []string{keyActiveSet, keyLatestRun, r.dayKey()},
		f.Email, id, string(f.Type), now.UnixMilli(), at36(now), f.ID,
		p.SoftLimit, p.SoftWindow.Milliseconds(), boolArg(f.Digest), r.topics.all, issueArg(f.Issue)).StringSlice()
	if err != nil {
		return FeedbackResult{}, fmt.Errorf("record %s feedback: %w", f.Type, err)
	}
	switch {
	case len(res) == 1 && res[0] == "duplicate":
		return FeedbackResult{Duplicate: true}, nil
	case len(res) == 1 && res[0] == "notfound":
		return FeedbackResult{}, ErrNotFound
	case len(res) != 5:
		return FeedbackResult{}, fmt.Errorf("record feedback: unexpected answer %q", res)
	}
	sub, err := decodeRecord(res[1], res[2])
	if err != nil {
		return FeedbackResult{}, err
	}
	sub.Topics = splitTopics(res[4])
	soft, _ := strconv.Atoi(res[3])
	return FeedbackResult{Subscriber: sub, Changed: res[0] == "changed", SoftBounces: soft}, nil
}

func issueArg(id int64) string {
	if id <= 0 {
		return ""
	}
	return strconv.FormatInt(id, 10)
}

// Suppressed implements Suppressions.
func (r *Redis) Suppressed(ctx context.Context, status Status, after int64, limit int) ([]Subscriber, error) {
	var codes []string
	switch status {
	case "":
		codes = []string{"b", "c"}
	case Bounced, Complained:
		codes = []string{codeByStatus[status]}
	default:
		return nil, fmt.Errorf("status %q is no suppression: want bounced or complained", status)
	}
	if limit <= 0 {
		return nil, nil
	}
	var ids []int64
	for _, c := range codes {
		got, err := r.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{
			Key: prefixSupp + c, ByScore: true, Start: "(" + strconv.FormatInt(after, 10), Stop: "+inf", Count: int64(limit),
		}).Result()
		if err != nil {
			return nil, fmt.Errorf("list suppressions: %w", err)
		}
		for _, s := range got {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("list suppressions: member %q", s)
			}
			ids = append(ids, n)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > limit {
		ids = ids[:limit]
	}
	subs, err := r.SubscribersByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := subs[:0]
	for _, s := range subs {
		// The list and the records change in the same scripts; a record
		// in another state would be a bug, and is left out.
		if s.ID != 0 && (s.Status == Bounced || s.Status == Complained) && (status == "" || s.Status == status) {
			out = append(out, s)
		}
	}
	return out, nil
}

// LiftSuppression implements Suppressions.
func (r *Redis) LiftSuppression(ctx context.Context, email string) (Subscriber, error) {
	res, err := liftScript.Run(ctx, r.rdb, []string{keyActiveSet}, email, r.topics.all, r.topics.defaults).StringSlice()
	if err != nil {
		return Subscriber{}, fmt.Errorf("lift suppression: %w", err)
	}
	return decodeResult(res)
}
