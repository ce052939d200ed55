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

// feedbackScript applies one bounce or complaint report to a subscriber,
// once: hard bounce → bounced; soft bounce → counted, bounced at the limit
// within the window; complaint → complained (which nothing overrides).
//
//	KEYS[1]  the shard's anchor (anchor, visit; the id's shard when ARGV[2] is given)
//	KEYS[2]  today's counters (sfxDay)
//	ARGV[1]  email, or "" (then ARGV[2])
//	ARGV[2]  subscriber id, or "" (then ARGV[1]); both: they must agree
//	ARGV[3]  'hard', 'soft' or 'complaint'
//	ARGV[4]  now, unix ms
//	ARGV[5]  now, unix ms base 36 (the record's ended field)
//	ARGV[6]  report id ("" : not deduplicated)
//	ARGV[7]  soft bounces that make a bounce
//	ARGV[8]  soft-bounce window, ms
//	ARGV[10] every topic id, comma-separated
//
// Keeps the report in the person's history (logfeedback) and counts the
// day's bounce or complaint when the status changes. Writes the seen key of the report (30 days), the soft-bounce zset, the
// status, ended, the suppression lists, the active bit, a cancelled
// reconfirmation (cancelreconfirm), the topics (an ended subscription has
// none, as after endScript). The run's or the issue's bounces or
// complaints counter is the caller's (RecordFeedback), in their own slot.
// Answers 'duplicate', 'notfound', or 'ok' / 'changed' with the id, the
// record, the soft-bounce count and the topics ('away' and 'gone' as
// byAddress takes them, before anything is written).
var feedbackScript = subscriberScript(`
DAY = KEYS[2]
local now = tonumber(ARGV[4])
local id, r, miss
if ARGV[2] ~= '' then
  local v = redis.call('HGET', subkey(ARGV[2]), ARGV[2])
  if v then
    id, r = ARGV[2], unpackrec(v)
    if ARGV[1] ~= '' and r[5] ~= ARGV[1] then id = nil end
  end
  if not id then miss = {'notfound'} end
else
  id, r, miss = lookup(ARGV[1])
end
if miss and miss[1] ~= 'notfound' then return miss end
if ARGV[6] ~= '' and not redis.call('SET', SEEN .. ARGV[6], '1', 'NX', 'EX', 2592000) then
  return {'duplicate'}
end
if miss then return miss end
logfeedback(id, ARGV[3], ARGV[4])
local to, soft = nil, 0
if ARGV[3] == 'complaint' then
  to = 'c'
elseif ARGV[3] == 'hard' then
  to = 'b'
else
  local k = SOFT .. id
  local member = ARGV[6] ~= '' and ARGV[6] or tostring(now)
  redis.call('ZADD', k, now, member)
  redis.call('ZREMRANGEBYSCORE', k, '-inf', now - tonumber(ARGV[8]))
  redis.call('PEXPIRE', k, ARGV[8])
  soft = redis.call('ZCARD', k)
  if soft >= tonumber(ARGV[7]) then to = 'b' end
end
local code = 'ok'
-- A report about the confirmation mailed to a suppressed address (or any
-- that suppresses) voids that confirmation.
if to then cancelreconfirm(id) end
if to and r[1] ~= 'c' and r[1] ~= to then
  r[1], r[4] = to, ARGV[5]
  save(id, r)
  -- save cleared the active bit only if the record was active; this
  -- clears it whatever the status was, as endScript does: a suppressed id
  -- must be in no audience even if a stray bit was left behind.
  redis.call('SETBIT', ACTIVE, slot(id), 0)
  redis.call('ZADD', SUPP .. to, id, id)
  if to == 'c' then redis.call('ZREM', SUPP .. 'b', id) end
  count(to == 'c' and 'complaint' or 'bounce')
  code = 'changed'
end
if r[1] == 'b' or r[1] == 'c' then settopics(id, ARGV[10], '') end
return {code, id, packrec(r), tostring(soft), topicsof(id, ARGV[10])}
`)

// countFeedbackScript counts a report against the latest digest run or
// an issue (RecordFeedback), after the subscriber's shard applied it.
//
//	KEYS[1]  keyLatestRun
//	ARGV[1]  'bounces' or 'complaints'
//	ARGV[2]  "1": count it against the latest digest run
//	ARGV[3]  the issue's key, or "": count it against that issue
//	ARGV[4]  prefixRun
//
// Writes the run's or the issue's counter (an issue that no longer exists
// counts nothing). Answers 1.
var countFeedbackScript = redis.NewScript(`
if ARGV[2] == '1' then
  local period = redis.call('GET', KEYS[1])
  if period then redis.call('HINCRBY', ARGV[4] .. period, ARGV[1], 1) end
end
if ARGV[3] ~= '' and redis.call('EXISTS', ARGV[3]) == 1 then
  redis.call('HINCRBY', ARGV[3], ARGV[1], 1)
end
return 1
`)

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
	args := []any{f.Email, id, string(f.Type), now.UnixMilli(), at36(now), f.ID,
		p.SoftLimit, p.SoftWindow.Milliseconds(), "", r.tl().all}
	var res []string
	var err error
	if f.SubscriberID > 0 {
		s := idShard(f.SubscriberID)
		res, err = feedbackScript.Run(ctx, r.rdb, r.withDay(anchor(s), s), args...).StringSlice()
	} else {
		res, _, err = r.byAddress(ctx, feedbackScript, f.Email, r.withDay, args)
	}
	if err != nil {
		return FeedbackResult{}, fmt.Errorf("record %s feedback: %w", f.Type, err)
	}
	if len(res) == 5 && (f.Digest || f.Issue > 0) {
		// Applied (not a duplicate): the run's or issue's figure, in
		// their slot. A crash between the two loses this one count, never
		// the person's state; the report sent again is a duplicate.
		field, issue := "bounces", ""
		if f.Type == Complaint {
			field = "complaints"
		}
		if f.Issue > 0 {
			issue = issueKey(f.Issue)
		}
		if err := countFeedbackScript.Run(ctx, r.rdb, []string{keyLatestRun}, field, boolArg(f.Digest), issue, prefixRun).Err(); err != nil {
			return FeedbackResult{}, fmt.Errorf("count %s feedback: %w", f.Type, err)
		}
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
	// Each shard's lists give their first limit ids after the cursor, in
	// one round trip; the first limit of them all are the page.
	var lists []*redis.StringSliceCmd
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, sh := range everyShard() {
			for _, c := range codes {
				lists = append(lists, p.ZRangeArgs(ctx, redis.ZRangeArgs{
					Key: suppKey(sh, c), ByScore: true, Start: "(" + strconv.FormatInt(after, 10), Stop: "+inf", Count: int64(limit),
				}))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list suppressions: %w", err)
	}
	var ids []int64
	for _, l := range lists {
		for _, s := range l.Val() {
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

// liftScript takes an address off the suppression list by hand. A bounced
// address that had confirmed is active again (a bounce is no choice of the
// person); a complaint is theirs, so that address becomes unsubscribed and
// only its own confirmation brings it back. The suppression took the
// topics away; the address made active again gets the default ones.
//
//	KEYS[1]  the shard's anchor (anchor, visit)
//	ARGV[1]  email
//	ARGV[2]  every topic id, comma-separated
//	ARGV[3]  the default topics, comma-separated
//
// Writes the status, the active bit, the topics, the suppression lists
// and forgets the soft bounces and any confirmation asked for (the address
// is out of the suppression's rules now). Answers 'ok', 'notsuppressed' or
// 'notfound', then the id, the record and the topics.
var liftScript = subscriberScript(`
local id, r, miss = lookup(ARGV[1])
if miss then return miss end
if r[1] ~= 'b' and r[1] ~= 'c' then return {'notsuppressed', id, packrec(r), topicsof(id, ARGV[2])} end
if r[1] == 'b' and r[3] ~= '' then
  r[1], r[4] = 'a', ''
  settopics(id, ARGV[2], ARGV[3])
else
  r[1] = 'u'
  settopics(id, ARGV[2], '')
end
save(id, r)
unsuppress(id)
redis.call('DEL', RECONF .. id)
return {'ok', id, packrec(r), topicsof(id, ARGV[2])}
`)

// LiftSuppression implements Suppressions.
func (r *Redis) LiftSuppression(ctx context.Context, email string) (Subscriber, error) {
	res, _, err := r.byAddress(ctx, liftScript, email, anchorOnly, []any{email, r.tl().all, r.tl().defaults})
	if err != nil {
		return Subscriber{}, fmt.Errorf("lift suppression: %w", err)
	}
	return decodeResult(res)
}
