package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// trashIssueScript moves an issue to the trash.
//
//	KEYS[1] the issue's hash   KEYS[2] keyIssueTrash   KEYS[3] keyArchiveGen
//	ARGV[1] id   ARGV[2] now (unix ms)
//
// A draft, scheduled or sent issue becomes trashed, the status it left
// in trashed_from, the time in trashed_at and the id in the trash's
// zset. A scheduled one starts a new round, so its plan task, due
// later, finds its round gone and does nothing; a sent one leaves the
// archive, whose caches see the generation grow. The slug stays the
// issue's, so a restore brings back the same address. Returns "ok", or
// "none" / "state:<status>" with nothing written.
var trashIssueScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return 'none' end
if st ~= 'draft' and st ~= 'scheduled' and st ~= 'sent' then return 'state:' .. st end
redis.call('HSET', KEYS[1], 'status', 'trashed', 'trashed_from', st, 'trashed_at', ARGV[2])
if st == 'scheduled' then redis.call('HINCRBY', KEYS[1], 'round', 1) end
if st == 'sent' then redis.call('INCR', KEYS[3]) end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 'ok'
`)

// restoreIssueScript brings a trashed issue back.
//
//	KEYS[1] the issue's hash   KEYS[2] keyIssueTrash   KEYS[3] keyArchiveGen
//	ARGV[1] id
//
// The status becomes trashed_from's, a scheduled issue's draft (its
// schedule cleared: its time may have passed in the trash, and a send
// is the publisher's to ask again). A sent one is back in the archive.
// Returns "ok", or "none" / "state:<status>" with nothing written.
var restoreIssueScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return 'none' end
if st ~= 'trashed' then return 'state:' .. st end
local to = redis.call('HGET', KEYS[1], 'trashed_from') or 'draft'
if to ~= 'sent' then
  to = 'draft'
  redis.call('HSET', KEYS[1], 'send_at', 0, 'local_time', '')
else
  redis.call('INCR', KEYS[3])
end
redis.call('HSET', KEYS[1], 'status', to)
redis.call('HDEL', KEYS[1], 'trashed_from', 'trashed_at')
redis.call('ZREM', KEYS[2], ARGV[1])
return 'ok'
`)

// purgeTrashScript removes the issues trashed before a time, for good.
//
//	KEYS[1] keyIssueTrash   KEYS[2] keyIssues   KEYS[3] keyIssueSlugs
//	ARGV[1] before (unix ms)   ARGV[2] most to remove   ARGV[3] prefixIssue
//	ARGV[4] suffixIssueVers
//
// Each one's hash, versions list, id in keyIssues and slug (free for a
// new issue) go; an id whose issue is no longer trashed (restored
// between) only leaves the trash's zset. The keys are built from the
// prefix: every issue's hash shares the {pub} tag of the keys above.
// Returns how many were removed.
var purgeTrashScript = redis.NewScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local n = 0
for _, id in ipairs(ids) do
  local key = ARGV[3] .. id
  if redis.call('HGET', key, 'status') == 'trashed' then
    local slug = redis.call('HGET', key, 'slug')
    if slug and redis.call('HGET', KEYS[3], slug) == id then redis.call('HDEL', KEYS[3], slug) end
    redis.call('DEL', key, key .. ARGV[4])
    redis.call('ZREM', KEYS[2], id)
    n = n + 1
  end
  redis.call('ZREM', KEYS[1], id)
end
return n
`)

// TrashIssue implements Issues.
func (r *Redis) TrashIssue(ctx context.Context, id int64) (Issue, error) {
	res, err := trashIssueScript.Run(ctx, r.rdb, []string{issueKey(id), keyIssueTrash, keyArchiveGen}, id, ms(r.now())).Text()
	if err != nil {
		return Issue{}, fmt.Errorf("trash issue %d: %w", id, err)
	}
	if err := scriptState(res, id); err != nil {
		return Issue{}, err
	}
	return r.Issue(ctx, id)
}

// RestoreIssue implements Issues.
func (r *Redis) RestoreIssue(ctx context.Context, id int64) (Issue, error) {
	res, err := restoreIssueScript.Run(ctx, r.rdb, []string{issueKey(id), keyIssueTrash, keyArchiveGen}, id).Text()
	if err != nil {
		return Issue{}, fmt.Errorf("restore issue %d: %w", id, err)
	}
	if err := scriptState(res, id); err != nil {
		return Issue{}, err
	}
	return r.Issue(ctx, id)
}

// PurgeTrash implements Issues.
func (r *Redis) PurgeTrash(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := purgeTrashScript.Run(ctx, r.rdb, []string{keyIssueTrash, keyIssues, keyIssueSlugs},
		ms(before), strconv.Itoa(limit), prefixIssue, suffixIssueVers).Int()
	if err != nil {
		return 0, fmt.Errorf("purge the trash: %w", err)
	}
	return n, nil
}
