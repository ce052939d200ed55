package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// feedKey names one feed of one topic: a hash of both, since a URL can be
// long, and the same feed in two topics feeds each once.
func feedKey(topic, url string) string {
	h := sha256.Sum256([]byte(topic + "\n" + url))
	return prefixFeed + hex.EncodeToString(h[:12])
}

// FeedState implements Feeds.
func (r *Redis) FeedState(ctx context.Context, topic, url string) (FeedState, error) {
	key := feedKey(topic, url)
	var h *redis.MapStringStringCmd
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSetNX(ctx, key, "reg", ms(r.now()))
		p.PExpire(ctx, key, FeedStateTTL)
		p.PExpire(ctx, key+":seen", FeedStateTTL)
		h = p.HGetAll(ctx, key)
		return nil
	})
	if err != nil {
		return FeedState{}, fmt.Errorf("feed state of %s: %w", url, err)
	}
	f := h.Val()
	return FeedState{ETag: f["etag"], LastModified: f["lm"], Registered: msTime(f["reg"]), Baselined: f["base"] == "1"}, nil
}

// saveFeedScript records one poll of a feed: new entries become items of
// the feed's topic, once each by entry id, in the same step as the
// validators that make the next poll conditional, so a crash can neither
// lose an entry behind a 304 nor add one twice.
//
//	KEYS[1]  prefixFeed .. feedKey           the feed's state hash
//	KEYS[2]  prefixFeed .. feedKey .. :seen  zset of entry ids, score = last seen
//	KEYS[3]  keyItemSeq
//	KEYS[4]  the topic's zset of item ids
//	ARGV[1]  now, unix ms
//	ARGV[2]  state lifetime, ms
//	ARGV[3]  entry ids kept (FeedSeenCap)
//	ARGV[4]  prefixItem
//	ARGV[5]  topic
//	ARGV[6]  ETag
//	ARGV[7]  Last-Modified
//	ARGV[8…] per entry, five: id, published (unix ms, 0 unknown), title, url, summary
//
// Before the state's base is set (the first saved poll), an entry becomes
// an item only if published after reg. Writes the state's etag, lm and
// base. Answers the number of items added.
var saveFeedScript = redis.NewScript(`
local base = redis.call('HGET', KEYS[1], 'base') == '1'
local reg = tonumber(redis.call('HGET', KEYS[1], 'reg') or ARGV[1])
local added = 0
for i = 8, #ARGV, 5 do
  local new = redis.call('ZADD', KEYS[2], ARGV[1], ARGV[i]) == 1
  if new and (base or tonumber(ARGV[i+1]) > reg) then
    local id = redis.call('INCR', KEYS[3])
    redis.call('HSET', ARGV[4] .. id, 't', ARGV[i+2], 'u', ARGV[i+3], 's', ARGV[i+4], 'p', ARGV[1], 'tp', ARGV[5])
    redis.call('ZADD', KEYS[4], id, id)
    added = added + 1
  end
end
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[3]) + 1))
redis.call('HSET', KEYS[1], 'reg', reg, 'etag', ARGV[6], 'lm', ARGV[7], 'base', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return added
`)

// SaveFeedPoll implements Feeds.
func (r *Redis) SaveFeedPoll(ctx context.Context, topic, url, etag, lastModified string, entries []FeedEntry) (int, error) {
	if len(entries) > FeedMaxEntries {
		entries = entries[:FeedMaxEntries]
	}
	key := feedKey(topic, url)
	args := make([]any, 0, 7+5*len(entries))
	args = append(args, ms(r.now()), FeedStateTTL.Milliseconds(), FeedSeenCap, prefixItem, topic, etag, lastModified)
	for _, e := range entries {
		pub := "0"
		if !e.Published.IsZero() {
			pub = strconv.FormatInt(e.Published.UnixMilli(), 10)
		}
		args = append(args, e.ID, pub, e.Title, e.URL, e.Summary)
	}
	n, err := saveFeedScript.Run(ctx, r.rdb, []string{key, key + ":seen", keyItemSeq, itemsKey(topic)}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("save poll of %s: %w", url, err)
	}
	return n, nil
}
