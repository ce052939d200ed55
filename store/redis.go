package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the Store on a Redis server (or miniredis). Every state change is
// one Lua script (scripts.go); the keys are laid out in keys.go.
type Redis struct {
	rdb redis.UniversalClient
	now func() time.Time
}

// NewRedis returns the store on rdb. It does not close rdb.
func NewRedis(rdb redis.UniversalClient) *Redis {
	return &Redis{rdb: rdb, now: time.Now}
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// Subscribe implements Subscribers.
func (r *Redis) Subscribe(ctx context.Context, req SubscribeRequest) (Subscriber, error) {
	activate, onlyNew := "0", "0"
	if req.Activate {
		activate = "1"
	}
	if req.OnlyNew {
		onlyNew = "1"
	}
	res, err := subscribeScript.Run(ctx, r.rdb,
		[]string{keyEmailIndex, keySeq, keyActive, keyOutbox, keyOutboxDue},
		req.Email, req.Name, req.Timezone, ms(r.now()), activate,
		req.Outbox.ID, req.Outbox.Body, ms(req.Outbox.Due), prefixSub, onlyNew).StringSlice()
	if err != nil {
		return Subscriber{}, fmt.Errorf("subscribe %s: %w", req.Email, err)
	}
	return decodeResult(res)
}

// Confirm implements Subscribers.
func (r *Redis) Confirm(ctx context.Context, email string, welcome OutboxEntry) (Subscriber, error) {
	res, err := confirmScript.Run(ctx, r.rdb,
		[]string{keyEmailIndex, keyActive, keyOutbox, keyOutboxDue},
		email, ms(r.now()), welcome.ID, welcome.Body, ms(welcome.Due), prefixSub).StringSlice()
	if err != nil {
		return Subscriber{}, fmt.Errorf("confirm %s: %w", email, err)
	}
	return decodeResult(res)
}

// Unsubscribe implements Subscribers.
func (r *Redis) Unsubscribe(ctx context.Context, email string, cancel ...string) (Subscriber, error) {
	return r.end(ctx, email, Unsubscribed, cancel)
}

// MarkBounced implements Subscribers.
func (r *Redis) MarkBounced(ctx context.Context, email string) error {
	_, err := r.end(ctx, email, Bounced, nil)
	return err
}

func (r *Redis) end(ctx context.Context, email string, to Status, cancel []string) (Subscriber, error) {
	args := []any{email, ms(r.now()), prefixSub, string(to)}
	for _, id := range cancel {
		args = append(args, id)
	}
	res, err := endScript.Run(ctx, r.rdb, []string{keyEmailIndex, keyActive, keyOutbox, keyOutboxDue}, args...).StringSlice()
	if err != nil {
		return Subscriber{}, fmt.Errorf("mark %s %s: %w", email, to, err)
	}
	return decodeResult(res)
}

// Get implements Subscribers.
func (r *Redis) Get(ctx context.Context, email string) (Subscriber, error) {
	id, err := r.rdb.HGet(ctx, keyEmailIndex, email).Result()
	if errors.Is(err, redis.Nil) {
		return Subscriber{}, ErrNotFound
	}
	if err != nil {
		return Subscriber{}, fmt.Errorf("load subscriber %s: %w", email, err)
	}
	fields, err := r.rdb.HGetAll(ctx, prefixSub+id).Result()
	if err != nil {
		return Subscriber{}, fmt.Errorf("load subscriber %s: %w", email, err)
	}
	if len(fields) == 0 {
		return Subscriber{}, ErrNotFound
	}
	return decodeFields(fields), nil
}

// decodeResult reads a script's answer: a code, then HGETALL's flat list.
func decodeResult(res []string) (Subscriber, error) {
	if len(res) == 0 {
		return Subscriber{}, errors.New("empty script result")
	}
	fields := make(map[string]string, (len(res)-1)/2)
	for i := 1; i+1 < len(res); i += 2 {
		fields[res[i]] = res[i+1]
	}
	var sub Subscriber
	if len(fields) > 0 {
		sub = decodeFields(fields)
	}
	switch res[0] {
	case "ok":
		return sub, nil
	case "active":
		return sub, ErrAlreadyActive
	case "notpending":
		return sub, ErrNotPending
	case "notfound":
		return sub, ErrNotFound
	case "exists":
		return sub, ErrExists
	}
	return sub, fmt.Errorf("unexpected script result %q", res[0])
}

func decodeFields(f map[string]string) Subscriber {
	id, _ := strconv.ParseInt(f["id"], 10, 64)
	return Subscriber{
		ID: id, Email: f["e"], Name: f["n"], Timezone: f["tz"], Status: Status(f["s"]),
		CreatedAt: msTime(f["c"]), ConfirmedAt: msTime(f["cf"]), UnsubscribedAt: msTime(f["u"]),
	}
}

func msTime(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// OutboxDone implements Outbox.
func (r *Redis) OutboxDone(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	members := make([]any, len(ids))
	for i, id := range ids {
		members[i] = id
	}
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, keyOutbox, ids...)
		p.ZRem(ctx, keyOutboxDue, members...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("clear %d outbox entries: %w", len(ids), err)
	}
	return nil
}

// OutboxDue implements Outbox.
func (r *Redis) OutboxDue(ctx context.Context, before time.Time, limit int) ([]OutboxEntry, error) {
	zs, err := r.rdb.ZRangeByScoreWithScores(ctx, keyOutboxDue, &redis.ZRangeBy{
		Min: "-inf", Max: ms(before), Count: int64(limit),
	}).Result()
	if err != nil || len(zs) == 0 {
		return nil, wrapErr("list outbox", err)
	}
	ids := make([]string, len(zs))
	for i, z := range zs {
		ids[i] = z.Member.(string)
	}
	bodies, err := r.rdb.HMGet(ctx, keyOutbox, ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	out := make([]OutboxEntry, 0, len(ids))
	for i, b := range bodies {
		s, ok := b.(string)
		if !ok { // removed between the two reads: its task is enqueued
			continue
		}
		out = append(out, OutboxEntry{ID: ids[i], Due: time.UnixMilli(int64(zs[i].Score)), Body: []byte(s)})
	}
	return out, nil
}

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

func markKeys(m Mark) (sent, claim string) {
	base := m.Kind + ":" + m.Key
	id := strconv.FormatInt(m.SubscriberID, 10)
	if m.Shared {
		return prefixSent + base, prefixClaim + base + ":" + id
	}
	return prefixSent + base + ":" + id, prefixClaim + base + ":" + id
}

// MarkSent implements Marks: one pipeline for all the marks. Each mark's
// sent bit is set before its claim is dropped, so a mark is never seen
// neither sent nor claimed; no transaction is needed for that, and none is
// paid for.
func (r *Redis) MarkSent(ctx context.Context, marks ...Mark) error {
	if len(marks) == 0 {
		return nil
	}
	expire := map[string]bool{}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range marks {
			sent, claim := markKeys(m)
			if m.Shared {
				p.SetBit(ctx, sent, m.SubscriberID, 1)
				if m.Key != "" && !expire[sent] {
					expire[sent] = true
					p.Expire(ctx, sent, sharedSentTTL)
				}
			} else {
				p.Set(ctx, sent, "1", sentTTL)
			}
			p.Del(ctx, claim)
		}
		return nil
	})
	return wrapErr(fmt.Sprintf("mark %d deliveries sent", len(marks)), err)
}

// Ping implements Subscribers.
func (r *Redis) Ping(ctx context.Context) error {
	return r.rdb.Ping(ctx).Err()
}

// SubscribeMany runs Subscribe for many requests in one pipeline (bulk
// import). The errors line up with reqs.
func (r *Redis) SubscribeMany(ctx context.Context, reqs []SubscribeRequest) ([]error, error) {
	now := ms(r.now())
	args := make([][]any, len(reqs))
	for i, req := range reqs {
		args[i] = []any{req.Email, req.Name, req.Timezone, now, boolArg(req.Activate),
			req.Outbox.ID, req.Outbox.Body, ms(req.Outbox.Due), prefixSub, boolArg(req.OnlyNew)}
	}
	keys := []string{keyEmailIndex, keySeq, keyActive, keyOutbox, keyOutboxDue}
	cmds, err := runPipelined(ctx, r.rdb, subscribeScript, func(int) []string { return keys }, args)
	if err != nil {
		return nil, fmt.Errorf("subscribe %d addresses: %w", len(reqs), err)
	}
	errs := make([]error, len(reqs))
	for i, c := range cmds {
		res, err := c.StringSlice()
		if err == nil {
			_, err = decodeResult(res)
		}
		errs[i] = err
	}
	return errs, nil
}

var _ Store = (*Redis)(nil)
