package store

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Order per person: two events for one person on one channel (push, SMS)
// are delivered in the order they were posted. The fan-out notes each
// person's event in a queue of theirs per channel, scored by when it was
// posted (Queue, idempotent: a fan-out run again notes the same entry);
// the channel's task for an event goes only when it is at the head of
// its person's queue (Turn) and leaves it when it is done, sent or given
// up (Leave). Only that person's next events wait; everyone else's go.
// An entry whose task was lost (deleted by an operator) would hold the
// rest: one older than StaleOrder is passed over.

// StaleOrder is how long an event may hold the ones posted after it for
// the same person and channel: past it, they go around it.
const StaleOrder = time.Hour

// PersonOrder is each person's order of events per channel.
type PersonOrder interface {
	// QueueInOrder notes that event key, posted at, will reach each of
	// ids by channel.
	QueueInOrder(ctx context.Context, channel, key string, at time.Time, ids []int64) error
	// Turn tells whether key's turn has come for subscriber id on
	// channel: every event noted before it is done, or stale.
	Turn(ctx context.Context, channel, key string, id int64) (bool, error)
	// Leave notes that key is done for subscriber id on channel.
	Leave(ctx context.Context, channel, key string, id int64) error
}

// QueueInOrder implements PersonOrder: one ZADD NX per person, pipelined.
// The entries expire with the person's queue a day after its last.
func (r *Redis) QueueInOrder(ctx context.Context, channel, key string, at time.Time, ids []int64) error {
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			k := orderKey(id, channel)
			p.ZAddNX(ctx, k, redis.Z{Score: float64(at.UnixMilli()), Member: key})
			p.Expire(ctx, k, 24*time.Hour+StaleOrder)
		}
		return nil
	})
	return wrapErr(fmt.Sprintf("queue %s in order for %d people", key, len(ids)), err)
}

// turnScript tells whether an event is at the head of a person's queue,
// passing over heads older than the stale limit.
//
//	KEYS[1]  the person's queue (orderKey)
//	ARGV[1]  the event's key
//	ARGV[2]  the stale limit: heads scored at or before it (unix ms) go
//
// Answers 1 when the event's turn has come (or it is not in the queue:
// done before, or never noted), 0 while another is ahead of it.
var turnScript = redis.NewScript(`
local mine = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not mine then return 1 end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
local head = redis.call('ZRANGE', KEYS[1], 0, 0)
if #head == 0 or head[1] == ARGV[1] then return 1 end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 1 end
return 0
`)

// Turn implements PersonOrder.
func (r *Redis) Turn(ctx context.Context, channel, key string, id int64) (bool, error) {
	stale := r.now().Add(-StaleOrder).UnixMilli()
	n, err := turnScript.Run(ctx, r.rdb, []string{orderKey(id, channel)}, key, stale).Int()
	if err != nil {
		return false, fmt.Errorf("turn of %s for %d: %w", key, id, err)
	}
	return n == 1, nil
}

// Leave implements PersonOrder.
func (r *Redis) Leave(ctx context.Context, channel, key string, id int64) error {
	return wrapErr("leave the order", r.rdb.ZRem(ctx, orderKey(id, channel), key).Err())
}
