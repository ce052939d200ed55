package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// FeedEntry is one entry of a polled RSS or Atom feed.
type FeedEntry struct {
	// ID identifies the entry within its feed (RSS guid, Atom id, or its
	// link when the feed gives neither): an entry becomes an item once.
	ID string
	// Published is the entry's own date (zero when the feed gives none).
	Published time.Time
	Title     string
	URL       string
	Summary   string
}

// FeedState is what the polls of one feed of one topic left behind.
type FeedState struct {
	// ETag and LastModified are the validators of the last answer, sent
	// back as If-None-Match and If-Modified-Since.
	ETag         string
	LastModified string
	// Registered is when the poller first met the feed.
	Registered time.Time
	// Baselined: a poll has been saved. Before that, only entries
	// published after Registered become items, so a new feed does not
	// pour its whole history into the next digest.
	Baselined bool
}

// FeedSeenCap bounds the entry ids remembered per feed: the most recently
// seen are kept. A poll saves at most FeedMaxEntries entries, far fewer,
// so an entry still in the feed is never forgotten and never comes back.
const (
	FeedSeenCap    = 2000
	FeedMaxEntries = 500
)

// FeedStateTTL is how long a feed's state outlives its last poll: a feed
// taken out of the topics file for longer starts afresh (a new baseline).
const FeedStateTTL = 30 * 24 * time.Hour

// FeedPost is an entry of a feed in mode each, made into the content of
// the issue it becomes if it is new (its slug made from the subject).
type FeedPost struct {
	EntryID string
	Content IssueContent
}

// FeedRelease is what a feed in mode each has to send: the issues let out
// (counted in their day's cap), which stay there until FeedPostDone.
type FeedRelease struct {
	Out []int64
	// Waiting is how many wait for a later day.
	Waiting int
}

// Feeds is the store's side of the feeds poller (RSS-to-email).
type Feeds interface {
	// FeedState returns the state of feed url of topic, registering the
	// feed now when it is new; each call keeps the state FeedStateTTL
	// longer.
	FeedState(ctx context.Context, topic, url string) (FeedState, error)
	// SaveFeedPoll records a poll's answer in one atomic step: each entry
	// not seen before becomes an item of topic (before the baseline, only
	// one published after the feed's registration), the entries are
	// remembered, and the validators are saved for the next conditional
	// GET. It answers how many items it added; saving the same answer
	// again adds none.
	SaveFeedPoll(ctx context.Context, topic, url, etag, lastModified string, entries []FeedEntry) (int, error)
	// SaveFeedPosts is SaveFeedPoll for a feed in mode each: each post
	// not seen before becomes a draft issue of its content, put in the
	// feed's waiting list in the same atomic step that marks its entry
	// seen, so a crash can neither lose an entry nor make it twice. Before
	// the feed's first saved poll every entry is only marked seen: a new
	// feed's backlog is not sent. It answers how many issues it made.
	SaveFeedPosts(ctx context.Context, topic, url, etag, lastModified string, posts []FeedPost) (int, error)
	// ReleaseFeedPosts lets waiting issues of the feed out, oldest first,
	// while fewer than maxPerDay were let out on day (its UTC date,
	// 2006-01-02); a waiting issue that is no longer a draft (a
	// publisher sent or cancelled it) leaves the list uncounted. It
	// answers every issue let out and not yet done, of any day.
	ReleaseFeedPosts(ctx context.Context, topic, url, day string, maxPerDay int) (FeedRelease, error)
	// FeedPostDone takes a let-out issue off the feed's list once it is
	// no longer a draft (sent, or moved by a publisher).
	FeedPostDone(ctx context.Context, topic, url string, issue int64) error
}

// FeedState implements Feeds.
func (r *Redis) FeedState(ctx context.Context, topic, url string) (FeedState, error) {
	key := feedKey(topic, url)
	var h *redis.MapStringStringCmd
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSetNX(ctx, key, "reg", ms(r.now()))
		p.PExpire(ctx, key, FeedStateTTL)
		for _, sfx := range []string{sfxFeedSeen, sfxFeedWait, sfxFeedOut} {
			p.PExpire(ctx, key+sfx, FeedStateTTL)
		}
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
	n, err := saveFeedScript.Run(ctx, r.rdb, []string{key, key + sfxFeedSeen, keyItemSeq, itemsKey(topic)}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("save poll of %s: %w", url, err)
	}
	return n, nil
}

// saveFeedPostsScript records one poll of a feed in mode each: a new
// entry becomes a draft issue, put on the feed's waiting list, in the
// step that marks it seen and saves the validators: an entry is claimed
// exactly when its issue exists.
//
//	KEYS[1]  prefixFeed .. feedKey           the feed's state hash
//	KEYS[2]  prefixFeed .. feedKey .. :seen  zset of entry ids, score = last seen
//	KEYS[3]  prefixFeed .. feedKey .. :wait  zset of waiting issue ids
//	KEYS[4]  keyIssueSeq   KEYS[5] keyIssues   KEYS[6] keyIssueSlugs
//	ARGV[1]  now, unix ms
//	ARGV[2]  state lifetime, ms
//	ARGV[3]  entry ids kept (FeedSeenCap)
//	ARGV[4]  prefixIssue
//	ARGV[5]  ETag   ARGV[6] Last-Modified
//	ARGV[7…] per entry, three: id, the issue's doc (JSON), slug wanted
//
// Before the state's base is set (the first saved poll), entries are
// only marked seen. Writes the state's etag, lm and base (and reg when
// missing). Answers the number of issues made.
var saveFeedPostsScript = redis.NewScript(newIssueLua + `
local base = redis.call('HGET', KEYS[1], 'base') == '1'
local made = 0
for i = 7, #ARGV, 3 do
  local new = redis.call('ZADD', KEYS[2], ARGV[1], ARGV[i]) == 1
  if new and base then
    local id = redis.call('INCR', KEYS[4])
    newissue(ARGV[4] .. id, KEYS[5], KEYS[6], id, ARGV[i+1], ARGV[i+2])
    redis.call('ZADD', KEYS[3], id, id)
    made = made + 1
  end
end
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[3]) + 1))
redis.call('HSETNX', KEYS[1], 'reg', ARGV[1])
redis.call('HSET', KEYS[1], 'etag', ARGV[5], 'lm', ARGV[6], 'base', '1')
for k = 1, 3 do
  if redis.call('EXISTS', KEYS[k]) == 1 then redis.call('PEXPIRE', KEYS[k], ARGV[2]) end
end
return made
`)

// SaveFeedPosts implements Feeds.
func (r *Redis) SaveFeedPosts(ctx context.Context, topic, url, etag, lastModified string, posts []FeedPost) (int, error) {
	if len(posts) > FeedMaxEntries {
		posts = posts[:FeedMaxEntries]
	}
	key := feedKey(topic, url)
	now := r.now().UTC().Truncate(time.Millisecond)
	args := make([]any, 0, 6+3*len(posts))
	args = append(args, ms(now), FeedStateTTL.Milliseconds(), FeedSeenCap, prefixIssue, etag, lastModified)
	for _, p := range posts {
		doc, err := json.Marshal(issueDoc{IssueContent: p.Content, CreatedAt: now, UpdatedAt: now})
		if err != nil {
			return 0, fmt.Errorf("save posts of %s: %w", url, err)
		}
		args = append(args, p.EntryID, doc, Slugify(p.Content.Subject))
	}
	n, err := saveFeedPostsScript.Run(ctx, r.rdb, []string{key, key + sfxFeedSeen, key + sfxFeedWait, keyIssueSeq, keyIssues, keyIssueSlugs}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("save posts of %s: %w", url, err)
	}
	return n, nil
}

// releaseFeedPostsScript lets a feed's waiting issues out within the
// day's cap.
//
//	KEYS[1]  prefixFeed .. feedKey           the feed's state hash (day, dayn)
//	KEYS[2]  prefixFeed .. feedKey .. :wait  zset of waiting issue ids
//	KEYS[3]  prefixFeed .. feedKey .. :out   zset of issue ids let out
//	ARGV[1]  the day, 2006-01-02 (UTC)
//	ARGV[2]  the cap: issues let out per day
//	ARGV[3]  prefixIssue
//	ARGV[4]  state lifetime, ms
//
// A new day starts dayn at 0. While dayn is below the cap the oldest
// waiting issue moves to out and counts; one whose hash's status is no
// longer draft (a publisher's move) leaves wait uncounted. Answers
// {waiting, out ids…}.
var releaseFeedPostsScript = redis.NewScript(`
local n = 0
if redis.call('HGET', KEYS[1], 'day') == ARGV[1] then
  n = tonumber(redis.call('HGET', KEYS[1], 'dayn') or '0')
end
local cap = tonumber(ARGV[2])
while n < cap do
  local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not first then break end
  redis.call('ZREM', KEYS[2], first)
  if redis.call('HGET', ARGV[3] .. first, 'status') == 'draft' then
    redis.call('ZADD', KEYS[3], first, first)
    n = n + 1
  end
end
redis.call('HSET', KEYS[1], 'day', ARGV[1], 'dayn', n)
for k = 1, 3 do
  if redis.call('EXISTS', KEYS[k]) == 1 then redis.call('PEXPIRE', KEYS[k], ARGV[4]) end
end
local out = redis.call('ZRANGE', KEYS[3], 0, -1)
table.insert(out, 1, redis.call('ZCARD', KEYS[2]))
return out
`)

// ReleaseFeedPosts implements Feeds.
func (r *Redis) ReleaseFeedPosts(ctx context.Context, topic, url, day string, maxPerDay int) (FeedRelease, error) {
	key := feedKey(topic, url)
	res, err := releaseFeedPostsScript.Run(ctx, r.rdb, []string{key, key + sfxFeedWait, key + sfxFeedOut},
		day, maxPerDay, prefixIssue, FeedStateTTL.Milliseconds()).Slice()
	if err != nil {
		return FeedRelease{}, fmt.Errorf("release posts of %s: %w", url, err)
	}
	var rel FeedRelease
	for i, v := range res {
		var n int64
		switch v := v.(type) {
		case int64:
			n = v
		case string:
			if n, err = strconv.ParseInt(v, 10, 64); err != nil {
				return FeedRelease{}, fmt.Errorf("release posts of %s: issue id %q: %w", url, v, err)
			}
		default:
			return FeedRelease{}, fmt.Errorf("release posts of %s: unexpected answer %v", url, v)
		}
		if i == 0 {
			rel.Waiting = int(n)
		} else {
			rel.Out = append(rel.Out, n)
		}
	}
	return rel, nil
}

// FeedPostDone implements Feeds.
func (r *Redis) FeedPostDone(ctx context.Context, topic, url string, issue int64) error {
	if err := r.rdb.ZRem(ctx, feedKey(topic, url)+sfxFeedOut, issue).Err(); err != nil {
		return fmt.Errorf("post %d of %s done: %w", issue, url, err)
	}
	return nil
}
