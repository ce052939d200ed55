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

// AddItem implements Digests.
func (r *Redis) AddItem(ctx context.Context, it Item) (Item, error) {
	it.PublishedAt = r.now().UTC().Truncate(time.Millisecond)
	id, err := addItemScript.Run(ctx, r.rdb, []string{keyItemSeq, keyItems},
		prefixItem, it.Title, it.URL, it.Summary, ms(it.PublishedAt)).Int64()
	if err != nil {
		return Item{}, fmt.Errorf("add item: %w", err)
	}
	it.ID = id
	return it, nil
}

// StartDigestRun implements Digests.
func (r *Redis) StartDigestRun(ctx context.Context, period string) (DigestRun, bool, error) {
	n, err := startRunScript.Run(ctx, r.rdb, []string{prefixRun + period, keyLastItem, keyItems, keyActive, keyLatestRun},
		ms(r.now()), period).Int()
	if err != nil {
		return DigestRun{}, false, fmt.Errorf("start digest %s: %w", period, err)
	}
	run, err := r.DigestRun(ctx, period)
	return run, n == 1, err
}

// DigestRun implements Digests.
func (r *Redis) DigestRun(ctx context.Context, period string) (DigestRun, error) {
	var h *redis.MapStringStringCmd
	var sent, skipped, failed *redis.IntCmd
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		h = p.HGetAll(ctx, prefixRun+period)
		sent = p.BitCount(ctx, prefixSent+DigestMarkKind+":"+period, nil)
		skipped = p.BitCount(ctx, prefixOutcome+period+":"+OutcomeSkipped, nil)
		failed = p.BitCount(ctx, prefixOutcome+period+":"+OutcomeFailed, nil)
		return nil
	})
	if err != nil {
		return DigestRun{}, fmt.Errorf("load digest %s: %w", period, err)
	}
	f := h.Val()
	if len(f) == 0 {
		return DigestRun{}, ErrNoRun
	}
	run := DigestRun{
		Period: period, State: f["state"], CreatedAt: msTime(f["created"]), PlannedAt: msTime(f["planned_at"]),
		Sent: sent.Val(), Skipped: skipped.Val(), Failed: failed.Val(), Items: []Item{},
	}
	run.Audience, _ = strconv.ParseInt(f["audience"], 10, 64)
	run.Cursor, _ = strconv.ParseInt(f["cursor"], 10, 64)
	run.Planned, _ = strconv.ParseInt(f["planned"], 10, 64)
	if f["items"] != "" {
		if run.Items, err = r.items(ctx, strings.Split(f["items"], ",")); err != nil {
			return DigestRun{}, err
		}
	}
	return run, nil
}

func (r *Redis) items(ctx context.Context, ids []string) ([]Item, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, prefixItem+id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load items: %w", err)
	}
	out := make([]Item, 0, len(ids))
	for i, c := range cmds {
		f := c.Val()
		if len(f) == 0 {
			continue
		}
		id, _ := strconv.ParseInt(ids[i], 10, 64)
		out = append(out, Item{ID: id, Title: f["t"], URL: f["u"], Summary: f["s"], PublishedAt: msTime(f["p"])})
	}
	return out, nil
}

// LatestDigestPeriod implements Digests.
func (r *Redis) LatestDigestPeriod(ctx context.Context) (string, error) {
	p, err := r.rdb.Get(ctx, keyLatestRun).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return p, wrapErr("latest digest", err)
}

// AdvanceDigestRun implements Digests.
func (r *Redis) AdvanceDigestRun(ctx context.Context, period string, cursor int64, n int, done bool) error {
	key := prefixRun + period
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, "cursor", cursor)
		p.HIncrBy(ctx, key, "planned", int64(n))
		if done {
			p.HSet(ctx, key, "state", RunPlanned, "planned_at", ms(r.now()))
		}
		return nil
	})
	return wrapErr("advance digest "+period, err)
}

// ActiveAfter implements Digests.
func (r *Redis) ActiveAfter(ctx context.Context, cursor int64, limit int) ([]int64, error) {
	ids, err := r.rdb.ZRangeByScore(ctx, keyActive, &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(cursor, 10), Max: "+inf", Count: int64(limit),
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("active after %d: %w", cursor, err)
	}
	out := make([]int64, len(ids))
	for i, s := range ids {
		out[i], _ = strconv.ParseInt(s, 10, 64)
	}
	return out, nil
}

// SubscribersByID implements Digests.
func (r *Redis) SubscribersByID(ctx context.Context, ids []int64) ([]Subscriber, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, prefixSub+strconv.FormatInt(id, 10))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load %d subscribers: %w", len(ids), err)
	}
	out := make([]Subscriber, len(ids))
	for i, c := range cmds {
		if f := c.Val(); len(f) > 0 {
			out[i] = decodeFields(f)
		}
	}
	return out, nil
}

// ClaimMarks implements Marks: one script call for all the marks. The
// script is atomic, so an error means no claim was taken.
func (r *Redis) ClaimMarks(ctx context.Context, marks []Mark, ttl time.Duration) ([]Claim, error) {
	if len(marks) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, 2*len(marks))
	args := make([]any, 0, 1+2*len(marks))
	args = append(args, ttl.Milliseconds())
	for _, m := range marks {
		sent, claim := markKeys(m)
		keys = append(keys, sent, claim)
		args = append(args, boolArg(m.Shared), m.SubscriberID)
	}
	codes, err := claimScript.Run(ctx, r.rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("claim %d marks: %w", len(marks), err)
	}
	if len(codes) != len(marks) {
		return nil, fmt.Errorf("claim %d marks: %d answers", len(marks), len(codes))
	}
	out := make([]Claim, len(marks))
	for i, c := range codes {
		out[i] = Claim(c)
	}
	return out, nil
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ReleaseMarks implements Marks.
func (r *Redis) ReleaseMarks(ctx context.Context, marks []Mark) error {
	if len(marks) == 0 {
		return nil
	}
	keys := make([]string, len(marks))
	for i, m := range marks {
		_, keys[i] = markKeys(m)
	}
	return wrapErr("release marks", r.rdb.Del(ctx, keys...).Err())
}

// SetOutcome implements Digests.
func (r *Redis) SetOutcome(ctx context.Context, period, outcome string, ids ...int64) error {
	if outcome != OutcomeSkipped && outcome != OutcomeFailed {
		return errors.New("unknown outcome " + outcome)
	}
	key := prefixOutcome + period + ":" + outcome
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.SetBit(ctx, key, id, 1)
		}
		p.Expire(ctx, key, sharedSentTTL)
		return nil
	})
	return wrapErr("record "+outcome, err)
}
