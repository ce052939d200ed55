package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// AudienceAfter implements Digests: the shards' active and topic
// bitmaps walked side by side (walkIDs). Nothing is written: the walk
// costs Redis no memory.
func (r *Redis) AudienceAfter(ctx context.Context, topic string, cursor int64, limit int) ([]int64, error) {
	terms := [][]string{{sfxActive}}
	if topic != "" {
		terms = append(terms, []string{topicSfx(topic)})
	}
	ids, err := r.walkIDs(ctx, terms, cursor, limit)
	if err != nil {
		return nil, fmt.Errorf("audience of %q after %d: %w", topic, cursor, err)
	}
	return ids, nil
}

// AudienceByShard implements Issues: the shards' active and topic
// bitmaps walked one shard after the other (walkShards).
func (r *Redis) AudienceByShard(ctx context.Context, topicIDs []string, after int64, limit int) ([]int64, error) {
	if len(topicIDs) == 0 {
		return nil, nil
	}
	terms := [][]string{{sfxActive}}
	if !slices.Contains(topicIDs, "") {
		anyOf := make([]string, len(topicIDs))
		for i, tp := range topicIDs {
			anyOf[i] = topicSfx(tp)
		}
		terms = append(terms, anyOf)
	}
	ids, err := r.walkShards(ctx, terms, after, limit)
	if err != nil {
		return nil, fmt.Errorf("audience of %q after walk key %d: %w", topicIDs, after, err)
	}
	return ids, nil
}

// recordBucket is the ids SubscribersByID reads from one record bucket:
// their fields (ids as text) and where each stands in the ids asked.
type recordBucket struct {
	fields []string
	at     []int
}

// byteStretch is the bytes lo..hi of a shard's bitmaps that a batch's
// ids cover.
type byteStretch struct{ lo, hi int64 }

// groupByBucket groups ids by their record bucket (order: the buckets'
// keys, first seen first) and by shard the stretch of bitmap bytes they
// cover. Ids of 0 or below (no such subscriber) are left out.
func groupByBucket(ids []int64) (order []string, buckets map[string]*recordBucket, stretches map[shard]*byteStretch) {
	buckets = map[string]*recordBucket{}
	stretches = map[shard]*byteStretch{}
	for i, id := range ids {
		if id <= 0 {
			continue // no such subscriber: ID 0
		}
		s := idShard(id)
		key := bucketKey(sfxSubs, id)
		b, ok := buckets[key]
		if !ok {
			b = &recordBucket{}
			buckets[key] = b
			order = append(order, key)
		}
		b.fields = append(b.fields, strconv.FormatInt(id, 10))
		b.at = append(b.at, i)
		at := idSlot(id) / 8
		if st, ok := stretches[s]; !ok {
			stretches[s] = &byteStretch{at, at}
		} else {
			st.lo, st.hi = min(st.lo, at), max(st.hi, at)
		}
	}
	return order, buckets, stretches
}

// SubscribersByID implements Digests: one HMGET per record bucket of the
// ids, and each topic's bitmap over the stretch of each shard the ids
// cover (a batch's ids are close together), all in one pipeline.
func (r *Redis) SubscribersByID(ctx context.Context, ids []int64) ([]Subscriber, error) {
	tl := r.tl() // one list throughout, though the console changes it meanwhile
	if len(ids) == 0 {
		return nil, nil
	}
	order, buckets, stretches := groupByBucket(ids)
	cmds := make([]*redis.SliceCmd, len(order))
	tags := make([]*redis.SliceCmd, len(order))
	fields := make([]*redis.SliceCmd, len(order))
	tps := map[shard][]*redis.StringCmd{}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, key := range order {
			b := buckets[key]
			cmds[j] = p.HMGet(ctx, key, b.fields...)
			// The tags and field values are packed as the records are:
			// the same bucket of their own hashes.
			id := ids[b.at[0]]
			tags[j] = p.HMGet(ctx, bucketKey(sfxTagList, id), b.fields...)
			fields[j] = p.HMGet(ctx, bucketKey(sfxFieldValues, id), b.fields...)
		}
		for s, st := range stretches {
			for _, t := range tl.ids {
				tps[s] = append(tps[s], p.GetRange(ctx, s.key(topicSfx(t)), st.lo, st.hi))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load %d subscribers: %w", len(ids), err)
	}
	out := make([]Subscriber, len(ids))
	for j, key := range order {
		b := buckets[key]
		for k, v := range cmds[j].Val() {
			rec, ok := v.(string)
			if !ok {
				continue // no such subscriber: ID 0
			}
			sub, err := decodeRecord(b.fields[k], rec)
			if err != nil {
				return nil, err
			}
			if v, ok := tags[j].Val()[k].(string); ok {
				sub.Tags = splitList(v)
			}
			if v, ok := fields[j].Val()[k].(string); ok {
				sub.Fields = unpackFields(v)
			}
			s := idShard(sub.ID)
			sub.Topics = []string{}
			for t, c := range tps[s] {
				if bitAt(c.Val(), idSlot(sub.ID)-stretches[s].lo*8) {
					sub.Topics = append(sub.Topics, tl.ids[t])
				}
			}
			out[b.at[k]] = sub
		}
	}
	return out, nil
}

// SetOutcome implements Digests.
func (r *Redis) SetOutcome(ctx context.Context, period, outcome string, ids ...int64) error {
	if outcome != OutcomeSkipped && outcome != OutcomeFailed {
		return errors.New("unknown outcome " + outcome)
	}
	sfx := outcomeKey(period, outcome)
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		touched := map[shard]bool{}
		for _, id := range ids {
			s := idShard(id)
			p.SetBit(ctx, s.key(sfx), idSlot(id), 1)
			touched[s] = true
		}
		for s := range touched {
			p.Expire(ctx, s.key(sfx), sharedSentTTL)
		}
		return nil
	})
	return wrapErr("record "+outcome, err)
}

// bitAt reads bit i of a stretch of a Redis bitmap (bit 0 is the high bit
// of the first byte); past its end, bits are 0.
func bitAt(bytes string, i int64) bool {
	if i < 0 || i/8 >= int64(len(bytes)) {
		return false
	}
	return bytes[i/8]&(0x80>>(i%8)) != 0
}
