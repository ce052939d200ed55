package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// transitionIssueScript moves an issue between statuses. It never writes
// the content (doc): an edit saved in between is kept.
//
//	KEYS[1] the issue's hash   KEYS[2] keyIssueOutbox   KEYS[3] keyIssueOutboxDue
//	ARGV[1] to   ARGV[2] allowed from, comma-separated
//	ARGV[3] "1": write the schedule, ARGV[9] and ARGV[10]
//	ARGV[4] "1": a new round (round+1, cursor 0, walk not done)
//	ARGV[5] outbox id or ""   ARGV[6] outbox body   ARGV[7] outbox due (unix ms)
//	ARGV[8] the round the issue must be in, or "" (the outbox entry names
//	        the round it plans, so a change raced by another is refused)
//	ARGV[9] send_at (unix ms, 0: none)   ARGV[10] local_time ("" : none)
//	ARGV[11] the version the content must have, or ""
//	ARGV[12] now (unix ms): sent_at, when to is sent
//
// A new round forgets the local-hour span the last round's planner
// recorded (RecordLocalSpan): the new plan records its own.
// Writes the status (and the outbox entry, in the same step); a move to
// paused records the status it left in paused_from, any other move
// clears it. Returns "ok", or "none" / "state:<status>" / "stale" with
// nothing written.
var transitionIssueScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return 'none' end
local ok = false
for f in string.gmatch(ARGV[2], '[^,]+') do if f == st then ok = true end end
if not ok then return 'state:' .. st end
if ARGV[8] ~= '' and redis.call('HGET', KEYS[1], 'round') ~= ARGV[8] then return 'stale' end
if ARGV[11] ~= '' and redis.call('HGET', KEYS[1], 'version') ~= ARGV[11] then return 'stale' end
redis.call('HSET', KEYS[1], 'status', ARGV[1])
if ARGV[1] == 'paused' then
  redis.call('HSET', KEYS[1], 'paused_from', st)
else
  redis.call('HDEL', KEYS[1], 'paused_from')
end
if ARGV[1] == 'sent' then redis.call('HSET', KEYS[1], 'sent_at', ARGV[12]) end
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'send_at', ARGV[9], 'local_time', ARGV[10]) end
if ARGV[4] == '1' then
  redis.call('HINCRBY', KEYS[1], 'round', 1)
  redis.call('HSET', KEYS[1], 'cursor', 0, 'plandone', 0)
  redis.call('HDEL', KEYS[1], 'local_first', 'local_last')
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[5], ARGV[6])
  redis.call('ZADD', KEYS[3], ARGV[7], ARGV[5])
end
return 'ok'
`)

// advanceIssueScript saves the planner's place.
//
//	KEYS[1] the issue's hash
//	ARGV[1] round   ARGV[2] cursor   ARGV[3] n   ARGV[4] "1": walk done
//	ARGV[5] the walk's order (WalkByShard, WalkByID)
//
// A stale round writes nothing. The order is kept with the cursor (the
// planner of every later round walks the same way). A page past the
// saved cursor moves it and counts: planned += n; maxcursor =
// max(maxcursor, cursor). A page not past it was counted (saved again
// after a lost answer) and only its done flag still counts. Returns 1
// when written.
var advanceIssueScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'round') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'walk', ARGV[5])
if tonumber(ARGV[2]) > tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0') then
  redis.call('HSET', KEYS[1], 'cursor', ARGV[2])
  redis.call('HINCRBY', KEYS[1], 'planned', ARGV[3])
  if tonumber(ARGV[2]) > tonumber(redis.call('HGET', KEYS[1], 'maxcursor') or '0') then
    redis.call('HSET', KEYS[1], 'maxcursor', ARGV[2])
  end
end
if ARGV[4] == '1' then redis.call('HSET', KEYS[1], 'plandone', 1) end
return 1
`)

// finishIssueScript marks a sending issue sent when everyone planned is
// accounted for.
//
//	KEYS[1] the issue's hash   KEYS[2] keyArchiveGen
//	ARGV[1] now (unix ms): its sent_at
//	ARGV[2] the readers sent, skipped or failed, counted over the shards
//	        just before (FinishIssue; the count only grows)
//
// Returns 1 when it marked the issue sent (and bumped the archive's
// generation in the same step, so no cache can miss the new issue); 0
// when it is not done; -1 when there is no such issue.
var finishIssueScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return -1 end
if st ~= 'sending' or redis.call('HGET', KEYS[1], 'plandone') ~= '1' then return 0 end
local planned = tonumber(redis.call('HGET', KEYS[1], 'planned') or '0')
if tonumber(ARGV[2]) < planned then return 0 end
redis.call('HSET', KEYS[1], 'status', 'sent', 'sent_at', ARGV[1])
redis.call('INCR', KEYS[2])
return 1
`)

func scriptState(res string, id int64) error {
	switch {
	case res == "ok":
		return nil
	case res == "none":
		return ErrNoIssue
	case res == "stale":
		return fmt.Errorf("issue %d: %w", id, ErrIssueStale)
	case strings.HasPrefix(res, "state:"):
		return &StateError{ID: id, Status: strings.TrimPrefix(res, "state:")}
	}
	return fmt.Errorf("issue %d: unexpected answer %q", id, res)
}

// TransitionIssue implements Issues: one script, which writes the
// status and schedule fields but never the content.
func (r *Redis) TransitionIssue(ctx context.Context, id int64, from []string, to string, ch IssueChange) (Issue, error) {
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return ""
	}
	num := func(n int) string {
		if n > 0 {
			return strconv.Itoa(n)
		}
		return ""
	}
	sendAt := "0"
	if !ch.SendAt.IsZero() {
		sendAt = ms(ch.SendAt)
	}
	res, err := transitionIssueScript.Run(ctx, r.rdb, []string{issueKey(id), keyIssueOutbox, keyIssueOutboxDue},
		to, strings.Join(from, ","), flag(ch.SetSchedule), flag(ch.NewRound), ch.Outbox.ID, ch.Outbox.Body, ms(ch.Outbox.Due),
		num(ch.Round), sendAt, ch.LocalTime, num(ch.Version), ms(r.now())).Text()
	if err != nil {
		return Issue{}, fmt.Errorf("issue %d to %s: %w", id, to, err)
	}
	if err := scriptState(res, id); err != nil {
		return Issue{}, err
	}
	return r.Issue(ctx, id)
}

// progressFields are the fields of an issue's hash that IssueProgress
// reads: not its doc (the body, JSON), which DigestRun, on the sequence
// sender's path for every mail, would otherwise fetch each time.
var progressFields = []string{"status", "planned", "bounces", "complaints", "cursor", "maxcursor", "plandone", "round", "walk"}

// IssueProgress implements Issues.
func (r *Redis) IssueProgress(ctx context.Context, id int64) (IssueProgress, error) {
	h, err := r.rdb.HMGet(ctx, issueKey(id), progressFields...).Result()
	if err != nil {
		return IssueProgress{}, fmt.Errorf("issue %d progress: %w", id, err)
	}
	f := make(map[string]string, len(progressFields))
	for i, v := range h {
		if s, ok := v.(string); ok {
			f[progressFields[i]] = s
		}
	}
	// Every issue's hash has a status from its creation on, and no script
	// writes to an issue without one: no status is no issue.
	if _, ok := f["status"]; !ok {
		return IssueProgress{}, ErrNoIssue
	}
	done, err := r.bitCounts(ctx, issueMarkKeys(id)...)
	if err != nil {
		return IssueProgress{}, fmt.Errorf("issue %d progress: %w", id, err)
	}
	n := func(k string) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
	return IssueProgress{Status: f["status"], Planned: n("planned"), Sent: done[0], Skipped: done[1], Failed: done[2],
		Bounces: n("bounces"), Complaints: n("complaints"), Cursor: n("cursor"), MaxCursor: n("maxcursor"),
		PlanDone: f["plandone"] == "1", Round: int(n("round")), Walk: f["walk"]}, nil
}

// AdvanceIssuePlan implements Issues.
func (r *Redis) AdvanceIssuePlan(ctx context.Context, id int64, round int, walk string, cursor int64, n int, done bool) error {
	if walk != WalkByShard && walk != WalkByID {
		return fmt.Errorf("advance issue %d: no walk order %q", id, walk)
	}
	d := ""
	if done {
		d = "1"
	}
	_, err := advanceIssueScript.Run(ctx, r.rdb, []string{issueKey(id)}, round, cursor, n, d, walk).Result()
	return wrapErr(fmt.Sprintf("advance issue %d", id), err)
}

// FinishIssue implements Issues. Every batch of an issue asks, and all
// but the last are told no: while the plan runs, by one read of the
// issue's hash; once it is done, by counting the shards' marks and a
// small script.
func (r *Redis) FinishIssue(ctx context.Context, id int64) (bool, error) {
	f, err := r.rdb.HMGet(ctx, issueKey(id), "status", "plandone").Result()
	if err != nil {
		return false, fmt.Errorf("finish issue %d: %w", id, err)
	}
	if f[0] == nil {
		return false, ErrNoIssue
	}
	if f[0] != "sending" || f[1] != "1" {
		return false, nil
	}
	done, err := r.bitCounts(ctx, issueMarkKeys(id)...)
	if err != nil {
		return false, fmt.Errorf("finish issue %d: %w", id, err)
	}
	n, err := finishIssueScript.Run(ctx, r.rdb, []string{issueKey(id), keyArchiveGen}, ms(r.now()), done[0]+done[1]+done[2]).Int()
	if err != nil {
		return false, fmt.Errorf("finish issue %d: %w", id, err)
	}
	if n == -1 {
		return false, ErrNoIssue
	}
	return n == 1, nil
}

// IssueAudience implements Issues: every shard counts its own
// (audience).
func (r *Redis) IssueAudience(ctx context.Context, topicIDs []string) (int64, error) {
	n, err := r.audience(ctx, topicIDs)
	if err != nil {
		return 0, fmt.Errorf("issue audience: %w", err)
	}
	return n, nil
}

// ArchiveGeneration implements Issues.
func (r *Redis) ArchiveGeneration(ctx context.Context) (int64, error) {
	n, err := r.rdb.Get(ctx, keyArchiveGen).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("archive generation: %w", err)
	}
	return n, nil
}

// recordLocalSpanScript widens the span of a local-hour send's held
// batches: the first and the last reader's hour, as its planner finds
// them page by page.
//
//	KEYS[1] the issue's hash
//	ARGV[1] the round the planner plans   ARGV[2] first (unix ms)
//	ARGV[3] last (unix ms)
//
// Returns 1, or 0 with nothing written when the issue is in another
// round (a reschedule or resume since plans afresh).
var recordLocalSpanScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'round') ~= ARGV[1] then return 0 end
local first = tonumber(redis.call('HGET', KEYS[1], 'local_first') or '0')
if first == 0 or tonumber(ARGV[2]) < first then redis.call('HSET', KEYS[1], 'local_first', ARGV[2]) end
local last = tonumber(redis.call('HGET', KEYS[1], 'local_last') or '0')
if tonumber(ARGV[3]) > last then redis.call('HSET', KEYS[1], 'local_last', ARGV[3]) end
return 1
`)

// RecordLocalSpan implements Issues.
func (r *Redis) RecordLocalSpan(ctx context.Context, id int64, round int, first, last time.Time) error {
	if err := recordLocalSpanScript.Run(ctx, r.rdb, []string{issueKey(id)}, round, ms(first), ms(last)).Err(); err != nil {
		return fmt.Errorf("issue %d local span: %w", id, err)
	}
	return nil
}
