package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The onboarding index: the subscribers who confirmed (and so had the
// sequence's first step scheduled) lately, by confirmation time. When the
// operator edits the sequence, the worker walks it to give everyone who
// has not passed a new step that step on time (worker.ReconcileSequence).
// Entries older than the sequence's longest delay are of no use and are
// trimmed then.

// Onboarding lists up to limit ids from the offset rank of those
// confirmed at or after since, in confirmation order. The index is
// trimmed to the sequence's length, so walking it by offset stays short.
func (r *Redis) Onboarding(ctx context.Context, since time.Time, offset, limit int) ([]int64, error) {
	// Each shard keeps its own index: the page is the merge of every
	// shard's first offset+limit entries, in (confirmed, id) order.
	cmds := make([]*redis.ZSliceCmd, Shards)
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range everyShard() {
			cmds[i] = p.ZRangeByScoreWithScores(ctx, s.key(sfxOnboard), &redis.ZRangeBy{Min: ms(since), Max: "+inf", Count: int64(offset + limit)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list onboarding: %w", err)
	}
	type entry struct {
		at float64
		id int64
	}
	var all []entry
	for _, c := range cmds {
		for _, z := range c.Val() {
			id, err := strconv.ParseInt(z.Member.(string), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("onboarding index: %q is no id", z.Member)
			}
			all = append(all, entry{z.Score, id})
		}
	}
	slices.SortFunc(all, func(a, b entry) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	out := make([]int64, 0, limit)
	for i := offset; i < len(all) && len(out) < limit; i++ {
		out = append(out, all[i].id)
	}
	return out, nil
}

// TrimOnboarding drops the entries confirmed before t.
func (r *Redis) TrimOnboarding(ctx context.Context, before time.Time) error {
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, s := range everyShard() {
			p.ZRemRangeByScore(ctx, s.key(sfxOnboard), "-inf", "("+ms(before))
		}
		return nil
	})
	return wrapErr("trim onboarding", err)
}

// SequenceVersion is the fingerprint of the sequence the waiting steps
// were scheduled by ("" before the first).
func (r *Redis) SequenceVersion(ctx context.Context) (string, error) {
	v, err := r.rdb.Get(ctx, keySequenceVer).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, wrapErr("read the sequence version", err)
}

// SetSequenceVersion records the fingerprint of the sequence the waiting
// steps follow.
func (r *Redis) SetSequenceVersion(ctx context.Context, v string) error {
	return wrapErr("record the sequence version", r.rdb.Set(ctx, keySequenceVer, v, 0).Err())
}
