package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/outbox"
	"github.com/redis/go-redis/v9"
)

// outboxKeys are one outbox's keys: its entries' bodies and their due times. The
// subscribers' scripts write theirs and the issues' scripts theirs, each
// in the hash slot of the keys it changes with it (Redis Cluster), so the
// relay reads every outbox (outboxes).
type outboxKeys struct{ hash, due string }

// outboxes are every outbox, in the order OutboxDue reads them: each
// shard's, then the issues'.
func outboxes() []outboxKeys {
	out := make([]outboxKeys, 0, Shards+1)
	for _, s := range everyShard() {
		out = append(out, outboxKeys{s.key(sfxOutbox), s.key(sfxDue)})
	}
	return append(out, outboxKeys{keyIssueOutbox, keyIssueOutboxDue})
}

// outboxDoneScript drops entries from one outbox.
//
//	KEYS[1]  the outbox's hash   KEYS[2]  its due zset
//	ARGV     the entry ids
//
// Deletes each id from both and answers the ids that were not in the hash
// (in another outbox, or cleared already), so the caller looks further
// only for those.
var outboxDoneScript = redis.NewScript(`
local missed = {}
for i = 1, #ARGV do
  if redis.call('HDEL', KEYS[1], ARGV[i]) == 0 then missed[#missed + 1] = ARGV[i] end
  redis.call('ZREM', KEYS[2], ARGV[i])
end
return missed
`)

// outboxOfID is the outbox an entry is written to, read off its id: a
// person's mail (confirm:, welcome:, step:, unsub…: the address after the
// first colon) sits in the address's home shard, everything else in the
// issues' outbox. It is a first guess, not a rule: a person from before
// the shards (layout 3) keeps their shard, so OutboxDone looks in every
// other outbox for what the guess missed.
func outboxOfID(id string) int {
	_, rest, ok := strings.Cut(id, ":")
	if !ok {
		return Shards
	}
	addr, _, _ := strings.Cut(rest, ":")
	if !strings.Contains(addr, "@") {
		return Shards
	}
	return int(homeShard(addr))
}

// OutboxDone implements Outbox. Each id is dropped from the outbox its id
// names (outboxOfID), one script per outbox touched, in one pipeline;
// only an id not found there is looked for in the others. Dropping every
// id from all 65 outboxes cost each signup 65 HDEL and 65 ZREM.
func (r *Redis) OutboxDone(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	boxes := outboxes()
	byBox := make([][]any, len(boxes))
	for _, id := range ids {
		b := outboxOfID(id)
		byBox[b] = append(byBox[b], id)
	}
	missed, err := r.dropFrom(ctx, boxes, byBox)
	if err == nil && len(missed) > 0 {
		missed, err = r.dropFrom(ctx, boxes, elsewhere(missed))
	}
	if err != nil {
		return fmt.Errorf("clear %d outbox entries: %w", len(ids), err)
	}
	return nil
}

// missedID is an id not found in the outbox it was looked for in.
type missedID struct {
	id  string
	box int
}

// elsewhere asks for each missed id in every outbox but the one it was
// missed in.
func elsewhere(missed []missedID) [][]any {
	byBox := make([][]any, Shards+1)
	for _, m := range missed {
		for b := range byBox {
			if b != m.box {
				byBox[b] = append(byBox[b], m.id)
			}
		}
	}
	return byBox
}

// dropFrom runs outboxDoneScript on each outbox with ids, in one pipeline,
// and answers the ids each did not hold.
func (r *Redis) dropFrom(ctx context.Context, boxes []outboxKeys, byBox [][]any) ([]missedID, error) {
	var which []int
	var args [][]any
	for b, ids := range byBox {
		if len(ids) > 0 {
			which, args = append(which, b), append(args, ids)
		}
	}
	cmds, err := runPipelined(ctx, r.rdb, outboxDoneScript, func(i int) []string {
		return []string{boxes[which[i]].hash, boxes[which[i]].due}
	}, args)
	if err != nil {
		return nil, err
	}
	var missed []missedID
	for i, c := range cmds {
		ids, err := c.StringSlice()
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			missed = append(missed, missedID{id, which[i]})
		}
	}
	return missed, nil
}

// OutboxDue implements Outbox: the earliest limit entries of every outbox
// together, their due times read in one round trip and their bodies in
// a second.
func (r *Redis) OutboxDue(ctx context.Context, before time.Time, limit int) ([]outbox.Entry, error) {
	boxes := outboxes()
	dues := make([]*redis.ZSliceCmd, len(boxes))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, b := range boxes {
			dues[i] = p.ZRangeByScoreWithScores(ctx, b.due, &redis.ZRangeBy{Min: "-inf", Max: ms(before), Count: int64(limit)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	type due struct {
		box int
		z   redis.Z
	}
	var all []due
	for i, c := range dues {
		for _, z := range c.Val() {
			all = append(all, due{i, z})
		}
	}
	slices.SortStableFunc(all, func(a, b due) int { return cmp.Compare(a.z.Score, b.z.Score) })
	all = all[:min(len(all), limit)]
	if len(all) == 0 {
		return nil, nil
	}
	bodies := make([]*redis.StringCmd, len(all))
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range all {
			bodies[i] = p.HGet(ctx, boxes[d.box].hash, d.z.Member.(string))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	out := make([]outbox.Entry, 0, len(all))
	for i, d := range all {
		b, err := bodies[i].Result()
		if errors.Is(err, redis.Nil) { // removed between the two reads: its task is enqueued
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read outbox: %w", err)
		}
		out = append(out, outbox.Entry{ID: d.z.Member.(string), Due: time.UnixMilli(int64(d.z.Score)), Body: []byte(b)})
	}
	return out, nil
}
