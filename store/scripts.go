package store

import "github.com/redis/go-redis/v9"

// Every state change of the Redis store is one Lua script, so it is atomic:
// a concurrent subscribe and unsubscribe of one address end in the state of
// whichever ran last, never a mix. Each script below has a table of its
// KEYS and ARGV and of what it writes; the layout of the keys and of the
// subscriber hash is in keys.go.
//
// A script computes the subscriber's key (prefixSub .. id) itself, from the
// id it reads in the address index: that is why the prefix is an ARGV and
// not a KEY. The store runs on one Redis (or a Sentinel-managed primary),
// never on a Cluster.

// subscribeScript adds an address or re-opens its ended subscription, and
// writes the outbox entry of the mail that the change calls for.
//
//	KEYS[1]  keyEmailIndex   hash email -> id
//	KEYS[2]  keySeq          id counter
//	KEYS[3]  keyActive       zset of active ids
//	KEYS[4]  keyOutbox       hash outbox id -> body
//	KEYS[5]  keyOutboxDue    zset outbox id by due time
//	ARGV[1]  email (normalised)
//	ARGV[2]  name, or ""
//	ARGV[3]  time zone, or ""
//	ARGV[4]  now, unix ms
//	ARGV[5]  "1": activate at once (no double opt-in, import)
//	ARGV[6]  outbox id, or "": no outbox entry
//	ARGV[7]  outbox body
//	ARGV[8]  outbox due, unix ms
//	ARGV[9]  prefixSub
//	ARGV[10] "1": only a new address (import); an existing one answers 'exists'
//
// Writes the subscriber hash: id, e, c on creation; n, tz when given; s;
// cf when activated; drops u and cf of an ended subscription it re-opens.
// Answers a code ('ok', 'active', 'exists') and the subscriber's fields as
// a flat list. The common case, a new address, writes the hash with one
// HSET and answers with the fields it wrote, so a signup costs no read-back.
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

// confirmScript activates a pending subscription and writes the welcome's
// outbox entry.
//
//	KEYS[1]  keyEmailIndex
//	KEYS[2]  keyActive
//	KEYS[3]  keyOutbox
//	KEYS[4]  keyOutboxDue
//	ARGV[1]  email
//	ARGV[2]  now, unix ms
//	ARGV[3]  welcome outbox id
//	ARGV[4]  welcome outbox body
//	ARGV[5]  welcome due, unix ms
//	ARGV[6]  prefixSub
//
// Writes s = 'active' and cf. Answers 'ok', 'active' (already), 'notpending'
// or 'notfound', then the subscriber's fields.
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

// endScript moves a subscription to unsubscribed or bounced and drops the
// outbox entries of mails that must no longer go. Bounced wins over
// unsubscribed: an address that bounced must not be mailed even if the
// person later asks to leave.
//
//	KEYS[1]  keyEmailIndex
//	KEYS[2]  keyActive
//	KEYS[3]  keyOutbox
//	KEYS[4]  keyOutboxDue
//	ARGV[1]  email
//	ARGV[2]  now, unix ms
//	ARGV[3]  prefixSub
//	ARGV[4]  the new status: 'unsubscribed' or 'bounced'
//	ARGV[5…] outbox ids to drop
//
// Writes s and u. Answers 'ok' or 'notfound', then the subscriber's fields.
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

// claimScript claims delivery marks (see markKeys), all of a batch in one
// call: a script call per mark cost more than the claims themselves.
//
//	KEYS[2i-1]  mark i's sent mark: a bitmap for shared marks, a string otherwise
//	KEYS[2i]    mark i's claim: a string with an expiry
//	ARGV[1]     claim ttl, ms
//	ARGV[2i]    "1": mark i is shared (bit ARGV[2i+1] of KEYS[2i-1])
//	ARGV[2i+1]  mark i's subscriber id
//
// Writes the claims it takes. Answers one code per mark: 0 claimed, 1
// already sent, 2 held by another run (the store.Claim values).
var claimScript = redis.NewScript(`
local out = {}
for i = 1, #KEYS / 2 do
  local sent, claim = KEYS[2*i-1], KEYS[2*i]
  local code
  if ARGV[2*i] == '1' then
    if redis.call('GETBIT', sent, ARGV[2*i+1]) == 1 then code = 1 end
  elseif redis.call('EXISTS', sent) == 1 then
    code = 1
  end
  if not code then
    if redis.call('SET', claim, '1', 'NX', 'PX', ARGV[1]) then code = 0 else code = 2 end
  end
  out[i] = code
end
return out
`)

// addItemScript numbers and stores a digest item in one step, so items
// become visible in id order and a run never skips an id that appears
// later.
//
//	KEYS[1]  keyItemSeq   item id counter
//	KEYS[2]  keyItems     zset of item ids
//	ARGV[1]  prefixItem
//	ARGV[2]  title
//	ARGV[3]  url
//	ARGV[4]  summary
//	ARGV[5]  published, unix ms
//
// Writes the item hash: t title, u url, s summary, p published. Answers the
// new id.
var addItemScript = redis.NewScript(`
local id = redis.call('INCR', KEYS[1])
redis.call('HSET', ARGV[1] .. id, 't', ARGV[2], 'u', ARGV[3], 's', ARGV[4], 'p', ARGV[5])
redis.call('ZADD', KEYS[2], id, id)
return id
`)

// startRunScript creates a period's digest run once, fixing its items
// (those after the last item any run took) and its audience.
//
//	KEYS[1]  prefixRun .. period   the run hash
//	KEYS[2]  keyLastItem           highest item id any run took
//	KEYS[3]  keyItems
//	KEYS[4]  keyActive
//	KEYS[5]  keyLatestRun          period of the latest run
//	ARGV[1]  now, unix ms
//	ARGV[2]  period
//
// Writes the run hash: items (comma-separated ids), created, audience,
// cursor, planned, state. Answers 1 when it created the run, 0 when the run
// existed.
var startRunScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local last = redis.call('GET', KEYS[2]) or '0'
local ids = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. last, '+inf')
local state = 'planning'
if #ids == 0 then
  state = 'empty'
else
  redis.call('SET', KEYS[2], ids[#ids])
end
redis.call('HSET', KEYS[1], 'items', table.concat(ids, ','), 'created', ARGV[1],
  'audience', redis.call('ZCARD', KEYS[4]), 'cursor', 0, 'planned', 0, 'state', state)
redis.call('SET', KEYS[5], ARGV[2])
return 1
`)
