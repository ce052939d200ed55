package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Layout is the key layout this code reads and writes (keys.go).
const Layout = 2

// migrateChunk is how many ids one migration script call covers: a few
// milliseconds of Redis time, so traffic goes on between calls.
const migrateChunk = 1000

const keyMigrateLock = "nl:schema:lock"

// Migrate brings a Redis written by an earlier version to Layout. Every
// role calls it at start; it runs once per Redis, and running it again (or
// after a crash half-way) changes nothing already moved: each subscriber's
// move is one script that deletes the layout-1 keys it read. One process
// migrates while the others wait for it (a lock with an expiry, renewed
// as it goes). Until it is done, a subscriber it has not reached yet is
// moved by the first script that looks it up, so the service is correct
// while it runs; only the digest, which walks the new active set, should
// not start before the migration ends (a role that starts waits for it).
//
// Stop the roles of the earlier version before starting this one: they
// would go on writing layout 1.
func (r *Redis) Migrate(ctx context.Context, log *slog.Logger) error {
	for {
		v, err := r.rdb.Get(ctx, keySchema).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("read layout version: %w", err)
		}
		if v == strconv.Itoa(Layout) {
			return r.fill(ctx, log)
		}
		owner := strconv.FormatInt(time.Now().UnixNano(), 36)
		got, err := r.rdb.SetNX(ctx, keyMigrateLock, owner, time.Minute).Result()
		if err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		if got {
			return r.migrate(ctx, owner, log)
		}
		log.Info("store: another process is migrating the layout, waiting")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// migrateScript moves the layout-1 subscribers with ids in a range to
// layout 2 (migrate.go). A subscriber already moved has no layout-1 key
// left, so a range run again changes nothing.
//
//	ARGV[1]  first id
//	ARGV[2]  last id
//
// Answers how many it moved.
var migrateScript = subscriberScript(`
local n = 0
for id = tonumber(ARGV[1]), tonumber(ARGV[2]) do
  if migrate(tostring(id)) then n = n + 1 end
end
return n
`)

func (r *Redis) migrate(ctx context.Context, owner string, log *slog.Logger) error {
	last, err := r.rdb.Get(ctx, keySeq).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read the id counter: %w", err)
	}
	moved := int64(0)
	for from := int64(1); from <= last; from += migrateChunk {
		n, err := migrateScript.Run(ctx, r.rdb, nil, from, min(from+migrateChunk-1, last)).Int64()
		if err != nil {
			return fmt.Errorf("migrate subscribers %d..: %w", from, err)
		}
		moved += n
		// Keep the lock while going: a chunk takes milliseconds.
		if err := r.rdb.Expire(ctx, keyMigrateLock, time.Minute).Err(); err != nil {
			return fmt.Errorf("renew the migration lock: %w", err)
		}
		if moved > 0 && (from/migrateChunk)%100 == 99 {
			log.Info("store: migrating the layout", "moved", moved, "of_ids", last)
		}
	}
	// What a layout-1 writer left behind cannot be moved by id any more:
	// refuse to declare the layout done rather than lose it.
	left, err := r.rdb.Exists(ctx, v1EmailIndex, v1Active).Result()
	if err != nil {
		return fmt.Errorf("check the migration: %w", err)
	}
	if left > 0 {
		return fmt.Errorf("layout 1 keys are left after the migration (%s, %s): is a role of the earlier version still running?", v1EmailIndex, v1Active)
	}
	if err := r.rdb.Set(ctx, keySchema, Layout, 0).Err(); err != nil {
		return fmt.Errorf("record the layout version: %w", err)
	}
	if v, err := r.rdb.Get(ctx, keyMigrateLock).Result(); err == nil && v == owner {
		if err := r.rdb.Del(ctx, keyMigrateLock).Err(); err != nil {
			log.Warn("store: drop the migration lock; it expires on its own", "err", err)
		}
	}
	if moved > 0 {
		log.Info("store: layout migrated", "layout", Layout, "subscribers", moved)
	}
	return r.fill(ctx, log)
}

// fill adds what a later version keeps beside the layout: the
// suppression lists, the topics, then the status bitmaps.
func (r *Redis) fill(ctx context.Context, log *slog.Logger) error {
	if err := r.fillSuppressions(ctx, log); err != nil {
		return err
	}
	if err := r.fillTopics(ctx, log); err != nil {
		return err
	}
	return r.fillStatus(ctx, log)
}

// fillStatusScript sets the status bits of the subscribers of a range of
// ids written before the status bitmaps existed (migrate.go). save()
// keeps them from then on; a bit set twice changes nothing.
//
//	ARGV[1]  first id
//	ARGV[2]  last id
//
// Answers how many it looked at.
var fillStatusScript = subscriberScript(`
local n = 0
for b = math.floor(tonumber(ARGV[1]) / PER), math.floor(tonumber(ARGV[2]) / PER) do
  local f = redis.call('HGETALL', SUBS .. b)
  for i = 1, #f, 2 do
    local id = tonumber(f[i])
    if id >= tonumber(ARGV[1]) and id <= tonumber(ARGV[2]) then
      redis.call('SETBIT', statuskey(f[i + 1]:sub(1, 1)), id, 1)
      n = n + 1
    end
  end
end
return n
`)

// fillStatus sets the status bitmaps (prefixStatus) of every subscriber
// from before them, once (keyStatusFilled): the console lists and counts
// by them. Beside a live service it is safe: each chunk reads the records
// as they are in one script, and the scripts move a bit at every status
// change from then on.
func (r *Redis) fillStatus(ctx context.Context, log *slog.Logger) error {
	done, err := r.rdb.Exists(ctx, keyStatusFilled).Result()
	if err != nil {
		return fmt.Errorf("read the status bitmaps' state: %w", err)
	}
	if done == 1 {
		return nil
	}
	last, err := r.rdb.Get(ctx, keySeq).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read the id counter: %w", err)
	}
	seen := int64(0)
	for from := int64(0); from <= last; from += migrateChunk {
		n, err := fillStatusScript.Run(ctx, r.rdb, nil, from, min(from+migrateChunk-1, last)).Int64()
		if err != nil {
			return fmt.Errorf("fill the status bitmaps %d..: %w", from, err)
		}
		seen += n
	}
	if err := r.rdb.Set(ctx, keyStatusFilled, "1", 0).Err(); err != nil {
		return fmt.Errorf("record the status bitmaps' state: %w", err)
	}
	if seen > 0 {
		log.Info("store: subscribers indexed by status", "subscribers", seen)
	}
	return nil
}

// fillTopicsScript gives the subscribers of a range of ids who have no
// topics written yet (those from before topics existed) the default
// topics when pending or active, and records every one it looked at as
// known: a subscriber whose topics a person chose since is never
// touched, and a range run again changes nothing (migrate.go).
//
//	ARGV[1]  first id
//	ARGV[2]  last id
//	ARGV[3]  every topic id, comma-separated
//	ARGV[4]  the default topics, comma-separated
//
// Answers how many it gave topics.
var fillTopicsScript = subscriberScript(`
local n = 0
for b = math.floor(tonumber(ARGV[1]) / PER), math.floor(tonumber(ARGV[2]) / PER) do
  local f = redis.call('HGETALL', SUBS .. b)
  for i = 1, #f, 2 do
    local id = tonumber(f[i])
    if id >= tonumber(ARGV[1]) and id <= tonumber(ARGV[2]) and redis.call('GETBIT', KNOWN, id) == 0 then
      local st = f[i + 1]:sub(1, 1)
      if st == 'a' or st == 'p' then
        settopics(id, ARGV[3], ARGV[4])
        n = n + 1
      else
        settopics(id, ARGV[3], '')
      end
    end
  end
end
return n
`)

// fillTopics gives every subscriber from before topics existed (pending or
// active) the default topics, once (keyTopicsFilled): those signed up
// since chose theirs and are never touched (keyTopicKnown), so running it
// again, or beside a live service, changes nothing a person chose. A
// second process doing it at the same time writes the same bits.
func (r *Redis) fillTopics(ctx context.Context, log *slog.Logger) error {
	done, err := r.rdb.Exists(ctx, keyTopicsFilled).Result()
	if err != nil {
		return fmt.Errorf("read the topics' state: %w", err)
	}
	if done == 1 {
		return nil
	}
	last, err := r.rdb.Get(ctx, keySeq).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read the id counter: %w", err)
	}
	given := int64(0)
	for from := int64(0); from <= last; from += migrateChunk {
		n, err := fillTopicsScript.Run(ctx, r.rdb, nil, from, min(from+migrateChunk-1, last), r.topics.all, r.topics.defaults).Int64()
		if err != nil {
			return fmt.Errorf("give subscribers %d.. the default topics: %w", from, err)
		}
		given += n
	}
	if err := r.rdb.Set(ctx, keyTopicsFilled, "1", 0).Err(); err != nil {
		return fmt.Errorf("record the topics' state: %w", err)
	}
	if given > 0 {
		log.Info("store: subscribers from before topics got the default topics", "subscribers", given, "topics", r.topics.defaults)
	}
	return nil
}

// fillSuppressionsScript puts the bounced and complained subscribers of a
// range of ids on the suppression lists: those written by a version that
// had no lists (migrate.go). Adding one twice changes nothing.
//
//	ARGV[1]  first id
//	ARGV[2]  last id
//
// Answers how many it found.
var fillSuppressionsScript = subscriberScript(`
local n = 0
for b = math.floor(tonumber(ARGV[1]) / PER), math.floor(tonumber(ARGV[2]) / PER) do
  local f = redis.call('HGETALL', SUBS .. b)
  for i = 1, #f, 2 do
    local st = f[i + 1]:sub(1, 1)
    if st == 'b' or st == 'c' then
      redis.call('ZADD', SUPP .. st, f[i], f[i])
      n = n + 1
    end
  end
end
return n
`)

// fillSuppressions puts the subscribers bounced before the suppression
// lists existed on them, once (keySuppFilled): a few seconds per million
// subscribers. Two processes doing it at once do no harm.
func (r *Redis) fillSuppressions(ctx context.Context, log *slog.Logger) error {
	done, err := r.rdb.Exists(ctx, keySuppFilled).Result()
	if err != nil {
		return fmt.Errorf("read the suppression lists' state: %w", err)
	}
	if done == 1 {
		return nil
	}
	last, err := r.rdb.Get(ctx, keySeq).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read the id counter: %w", err)
	}
	found := int64(0)
	for from := int64(0); from <= last; from += migrateChunk {
		n, err := fillSuppressionsScript.Run(ctx, r.rdb, nil, from, min(from+migrateChunk-1, last)).Int64()
		if err != nil {
			return fmt.Errorf("fill the suppression lists %d..: %w", from, err)
		}
		found += n
	}
	if err := r.rdb.Set(ctx, keySuppFilled, "1", 0).Err(); err != nil {
		return fmt.Errorf("record the suppression lists' state: %w", err)
	}
	if found > 0 {
		log.Info("store: bounced subscribers put on the suppression list", "subscribers", found)
	}
	return nil
}
