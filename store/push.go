package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// PushSubscription is one browser's web push subscription, kept with its
// subscriber: where to post and the browser's keys.
type PushSubscription struct {
	Endpoint string `json:"endpoint"`
	P256DH   []byte `json:"p256dh"` // the browser's public key (65 bytes)
	Auth     []byte `json:"auth"`   // the browser's secret (16 bytes)
	// CreatedAt is when the browser (last) subscribed.
	CreatedAt time.Time `json:"created_at"`
}

// MaxPushSubscriptions is how many browsers one subscriber can have
// notified. A browser that subscribes past it replaces the one that
// subscribed longest ago: people change browsers and devices more often
// than they remember to turn notifications off.
const MaxPushSubscriptions = 10

// PushSubscriptions are the subscribers' browsers. They end with the
// subscription when the person leaves (Unsubscribe, or the last topic
// turned off); a bounce or a complaint leaves them stored but unused, as
// only active subscribers are notified.
type PushSubscriptions interface {
	// AddPushSubscription stores p for the active subscriber id; one with
	// the same endpoint is replaced (a browser renews its keys). Not
	// active: ErrNotActive; no such id: ErrNotFound; nothing is stored.
	AddPushSubscription(ctx context.Context, id int64, p PushSubscription) error
	// PushSubscriptions lists id's browsers, oldest first.
	PushSubscriptions(ctx context.Context, id int64) ([]PushSubscription, error)
	// PushSubscriptionsOf lists the browsers of many subscribers in one
	// round trip, lined up with ids.
	PushSubscriptionsOf(ctx context.Context, ids []int64) ([][]PushSubscription, error)
	// HavePushSubscriptions tells, lined up with ids and in one round
	// trip, which subscribers have a browser or an app install (Devices)
	// to notify: the fan-out's question for the push lane, far cheaper
	// than reading the browsers and devices themselves.
	HavePushSubscriptions(ctx context.Context, ids []int64) ([]bool, error)
	// DeletePushSubscription forgets one browser (its push service said
	// 404 or 410). One already gone is no error.
	DeletePushSubscription(ctx context.Context, id int64, endpoint string) error
	// DeletePushSubscriptions forgets all of id's browsers.
	DeletePushSubscriptions(ctx context.Context, id int64) error
}

// The stored value of one browser: a sequence number that orders a
// subscriber's browsers (the eviction takes the lowest), the time it
// subscribed, and its keys (base64url), separated by spaces.

func encodePush(p PushSubscription) string {
	enc := base64.RawURLEncoding
	return ms(p.CreatedAt) + " " + enc.EncodeToString(p.P256DH) + " " + enc.EncodeToString(p.Auth)
}

func decodePush(endpoint, v string) (PushSubscription, int64, error) {
	f := strings.Split(v, " ")
	if len(f) != 4 {
		return PushSubscription{}, 0, fmt.Errorf("push subscription %q: unreadable value", endpoint)
	}
	seq, err1 := strconv.ParseInt(f[0], 10, 64)
	p256dh, err2 := base64.RawURLEncoding.DecodeString(f[2])
	auth, err3 := base64.RawURLEncoding.DecodeString(f[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return PushSubscription{}, 0, fmt.Errorf("push subscription %q: unreadable value", endpoint)
	}
	return PushSubscription{Endpoint: endpoint, P256DH: p256dh, Auth: auth, CreatedAt: msTime(f[1])}, seq, nil
}

// addPushScript stores one browser (or one app install: AddDevice) of an
// active subscriber and evicts the oldest past the cap.
//
//	KEYS[1]  the id's shard's anchor
//	KEYS[2]  the subscriber's browsers (pushKey) or devices (deviceKey)
//	ARGV[1]  subscriber id
//	ARGV[2]  endpoint (a device: its id)
//	ARGV[3]  created (unix ms) and the browser's keys (a device: its
//	         platform and token), space-separated
//	ARGV[4]  the cap
//
// Writes the browser's field (its value prefixed with a sequence number
// one above the highest held) and deletes the lowest-numbered fields past
// the cap. Answers 'ok', 'notactive' or 'notfound'.
var addPushScript = subscriberScript(`
local id = ARGV[1]
if redis.call('GETBIT', ACTIVE, slot(id)) == 0 then
  if redis.call('HEXISTS', subkey(id), id) == 0 then return 'notfound' end
  return 'notactive'
end
local all = redis.call('HGETALL', KEYS[2])
local top, seqs = 0, {}
for i = 1, #all, 2 do
  if all[i] ~= ARGV[2] then
    local n = tonumber(all[i + 1]:match('^%d+'))
    seqs[#seqs + 1] = {n, all[i]}
    if n > top then top = n end
  end
end
redis.call('HSET', KEYS[2], ARGV[2], (top + 1) .. ' ' .. ARGV[3])
table.sort(seqs, function(a, b) return a[1] < b[1] end)
local over = #seqs + 1 - tonumber(ARGV[4])
for i = 1, over do redis.call('HDEL', KEYS[2], seqs[i][2]) end
return 'ok'
`)

// AddPushSubscription implements PushSubscriptions.
func (r *Redis) AddPushSubscription(ctx context.Context, id int64, p PushSubscription) error {
	if p.Endpoint == "" {
		return fmt.Errorf("push subscription of %d: no endpoint", id)
	}
	p.CreatedAt = r.now()
	res, err := addPushScript.Run(ctx, r.rdb, []string{anchor(idShard(id)), pushKey(id)}, id, p.Endpoint, encodePush(p), MaxPushSubscriptions).Text()
	if err != nil {
		return fmt.Errorf("store a push subscription of %d: %w", id, err)
	}
	switch res {
	case "ok":
		return nil
	case "notactive":
		return ErrNotActive
	case "notfound":
		return ErrNotFound
	}
	return fmt.Errorf("store a push subscription of %d: answer %q", id, res)
}

// PushSubscriptions implements PushSubscriptions.
func (r *Redis) PushSubscriptions(ctx context.Context, id int64) ([]PushSubscription, error) {
	all, err := r.PushSubscriptionsOf(ctx, []int64{id})
	if err != nil {
		return nil, err
	}
	return all[0], nil
}

// PushSubscriptionsOf implements PushSubscriptions.
func (r *Redis) PushSubscriptionsOf(ctx context.Context, ids []int64) ([][]PushSubscription, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, pushKey(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the push subscriptions of %d subscribers: %w", len(ids), err)
	}
	out := make([][]PushSubscription, len(ids))
	for i, c := range cmds {
		type entry struct {
			p   PushSubscription
			seq int64
		}
		var es []entry
		for endpoint, v := range c.Val() {
			p, seq, err := decodePush(endpoint, v)
			if err != nil {
				return nil, fmt.Errorf("subscriber %d: %w", ids[i], err)
			}
			es = append(es, entry{p, seq})
		}
		slices.SortFunc(es, func(a, b entry) int { return int(a.seq - b.seq) })
		for _, e := range es {
			out[i] = append(out[i], e.p)
		}
	}
	return out, nil
}

// HavePushSubscriptions implements PushSubscriptions.
func (r *Redis) HavePushSubscriptions(ctx context.Context, ids []int64) ([]bool, error) {
	cmds := make([]*redis.IntCmd, len(ids))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.Exists(ctx, pushKey(id), deviceKey(id)) // one slot: the id's shard
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look for the push subscriptions of %d subscribers: %w", len(ids), err)
	}
	out := make([]bool, len(ids))
	for i, c := range cmds {
		out[i] = c.Val() > 0
	}
	return out, nil
}

// DeletePushSubscription implements PushSubscriptions.
func (r *Redis) DeletePushSubscription(ctx context.Context, id int64, endpoint string) error {
	return wrapErr("delete a push subscription", r.rdb.HDel(ctx, pushKey(id), endpoint).Err())
}

// DeletePushSubscriptions implements PushSubscriptions.
func (r *Redis) DeletePushSubscriptions(ctx context.Context, id int64) error {
	return wrapErr("delete the push subscriptions", r.rdb.Del(ctx, pushKey(id)).Err())
}
