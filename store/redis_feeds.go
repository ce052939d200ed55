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
