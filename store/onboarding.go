package store

import (
	"context"
	"errors"
	"fmt"
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
	zs, err := r.rdb.ZRangeByScore(ctx, keyOnboarding, &redis.ZRangeBy{Min: ms(since), Max: "+inf", Offset: int64(offset), Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("list onboarding: %w", err)
	}
	out := make([]int64, 0, len(zs))
	for _, z := range zs {
		id, err := strconv.ParseInt(z, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("onboarding index: %q is no id", z)
		}
		out = append(out, id)
	}
	return out, nil
}

// TrimOnboarding drops the entries confirmed before t.
func (r *Redis) TrimOnboarding(ctx context.Context, before time.Time) error {
	return wrapErr("trim onboarding", r.rdb.ZRemRangeByScore(ctx, keyOnboarding, "-inf", "("+ms(before)).Err())
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
