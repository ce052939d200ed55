package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis keys. One hash per subscriber keeps memory near 150 bytes each; the
// active set is a sorted set scored by id so the digest can walk it by
// keyset (id > cursor) in pages of any size.
const (
	keyEmailIndex = "nl:email"      // hash email -> id
	keySeq        = "nl:seq"        // counter for ids
	keyActive     = "nl:active"     // zset of active ids, score = id
	keyOutbox     = "nl:outbox"     // hash outbox id -> body
	keyOutboxDue  = "nl:outbox:due" // zset outbox id, score = due (unix ms)
	prefixSub     = "nl:sub:"       // hash per subscriber
	prefixSent    = "nl:sent:"
	prefixClaim   = "nl:claim:"
)

// How long delivery marks are kept. Per-key marks (confirm nonce, event
// bundle) only need to outlive every retry of their task; period bitmaps
// outlive the period by far.
const (
	sentTTL       = 30 * 24 * time.Hour
	sharedSentTTL = 120 * 24 * time.Hour
)

// Redis is the Store on a Redis server (or miniredis). Every state change is
// one Lua script, so a concurrent subscribe and unsubscribe of one address
// always end in the state of whichever ran last, never a mix.
type Redis struct {
	rdb redis.UniversalClient
	now func() time.Time
}

// NewRedis returns a Store on rdb. It does not close rdb.
func NewRedis(rdb redis.UniversalClient) *Redis {
	return &Redis{rdb: rdb, now: time.Now}
}

// subscribeScript's common case is a new address: it writes the subscriber
// with one HSET and answers with the fields it wrote, so a signup costs no
// read-back.
var subscribeScript = redis.NewScript(`
local id = redis.call('HGET', KEYS[1], ARGV[1])
local created = not id
local key
local fields
if not created then
  key = ARGV[9] .. id
  if ARGV[10] == '1' then
    local r = redis.call('HGETALL', key); table.insert(r, 1, 'exists'); return r
  end
  if redis.call('HGET', key, 's') == 'active' then
    local r = redis.call('HGETALL', key); table.insert(r, 1, 'active'); return r
  end
  redis.call('HDEL', key, 'u', 'cf')
  fields = {}
else
  id = tostring(redis.call('INCR', KEYS[2]))
  redis.call('HSET', KEYS[1], ARGV[1], id)
  key = ARGV[9] .. id
  fields = {'id', id, 'e', ARGV[1], 'c', ARGV[4]}
end
if ARGV[2] ~= '' then table.insert(fields, 'n'); table.insert(fields, ARGV[2]) end
if ARGV[3] ~= '' then table.insert(fields, 'tz'); table.insert(fields, ARGV[3]) end
table.insert(fields, 's')
if ARGV[5] == '1' then
  table.insert(fields, 'active'); table.insert(fields, 'cf'); table.insert(fields, ARGV[4])
  redis.call('ZADD', KEYS[3], id, id)
else
  table.insert(fields, 'pending')
end
redis.call('HSET', key, unpack(fields))
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[4], ARGV[6], ARGV[7])
  redis.call('ZADD', KEYS[5], ARGV[8], ARGV[6])
end
if created then table.insert(fields, 1, 'ok'); return fields end
local r = redis.call('HGETALL', key); table.insert(r, 1, 'ok'); return r
`)

var confirmScript = redis.NewScript(`
local id = redis.call('HGET', KEYS[1], ARGV[1])
if not id then return {'notfound'} end
local key = ARGV[6] .. id
local st = redis.call('HGET', key, 's')
local code = 'ok'
if st == 'pending' then
  redis.call('HSET', key, 's', 'active', 'cf', ARGV[2])
  redis.call('ZADD', KEYS[2], id, id)
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[3])
elseif st == 'active' then
  code = 'active'
else
  code = 'notpending'
end
local r = redis.call('HGETALL', key); table.insert(r, 1, code); return r
`)

// endScript moves a subscription to unsubscribed or bounced. Bounced wins
// over unsubscribed: an address that bounced must not be mailed even if the
// person later asks to leave.
var endScript = redis.NewScript(`
local id = redis.call('HGET', KEYS[1], ARGV[1])
if not id then return {'notfound'} end
local key = ARGV[3] .. id
local st = redis.call('HGET', key, 's')
if ARGV[4] == 'bounced' or (st ~= 'unsubscribed' and st ~= 'bounced') then
  redis.call('HSET', key, 's', ARGV[4], 'u', ARGV[2])
end
redis.call('ZREM', KEYS[2], id)
for i = 5, #ARGV do
  redis.call('HDEL', KEYS[3], ARGV[i])
  redis.call('ZREM', KEYS[4], ARGV[i])
end
local r = redis.call('HGETALL', key); table.insert(r, 1, 'ok'); return r
`)

var claimScript = redis.NewScript(`
if ARGV[1] == '1' then
  if redis.call('GETBIT', KEYS[1], ARGV[2]) == 1 then return 1 end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  return 1
end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[3]) then return 0 end
return 2
`)

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// Subscribe implements Store.
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

// Confirm implements Store.
func (r *Redis) Confirm(ctx context.Context, email string, welcome OutboxEntry) (Subscriber, error) {
	res, err := confirmScript.Run(ctx, r.rdb,
		[]string{keyEmailIndex, keyActive, keyOutbox, keyOutboxDue},
		email, ms(r.now()), welcome.ID, welcome.Body, ms(welcome.Due), prefixSub).StringSlice()
	if err != nil {
		return Subscriber{}, fmt.Errorf("confirm %s: %w", email, err)
	}
	return decodeResult(res)
}

// Unsubscribe implements Store.
func (r *Redis) Unsubscribe(ctx context.Context, email string, cancel ...string) (Subscriber, error) {
	return r.end(ctx, email, Unsubscribed, cancel)
}

// MarkBounced implements Store.
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

// Get implements Store.
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

// OutboxDone implements Store.
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

// OutboxDue implements Store.
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

// ClaimMark implements Store.
func (r *Redis) ClaimMark(ctx context.Context, m Mark, ttl time.Duration) (Claim, error) {
	claims, err := r.ClaimMarks(ctx, []Mark{m}, ttl)
	if err != nil {
		return Busy, err
	}
	return claims[0], nil
}

// MarkSent implements Store.
func (r *Redis) MarkSent(ctx context.Context, m Mark) error {
	sent, claim := markKeys(m)
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if m.Shared {
			p.SetBit(ctx, sent, m.SubscriberID, 1)
			if m.Key != "" {
				p.Expire(ctx, sent, sharedSentTTL)
			}
		} else {
			p.Set(ctx, sent, "1", sentTTL)
		}
		p.Del(ctx, claim)
		return nil
	})
	return wrapErr(fmt.Sprintf("mark %s/%s sent to %d", m.Kind, m.Key, m.SubscriberID), err)
}

// ReleaseMark implements Store.
func (r *Redis) ReleaseMark(ctx context.Context, m Mark) error {
	return r.ReleaseMarks(ctx, []Mark{m})
}

// Ping implements Store.
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
