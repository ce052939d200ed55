package store

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Every state change of the Redis store is one Lua script, so it is atomic:
// a concurrent subscribe and unsubscribe of one address end in the state of
// whichever ran last, never a mix. Each script below has a table of its
// KEYS and ARGV and of what it writes; the key layout and the subscriber
// record are in keys.go.
//
// The subscriber scripts find a subscriber's keys themselves (the record's
// bucket from its id, the index bucket from a hash of the address), from
// the helpers of subscriberLua: the store runs on one Redis (or a
// Sentinel-managed primary), never on a Cluster.

// subscriberLua is the prelude of the scripts that read or write
// subscribers: the record format and the address index of keys.go, and the
// migration of one layout-1 subscriber, so that a subscriber the migration
// has not reached yet is found (and migrated) by the first script that
// looks for it.
var subscriberLua = fmt.Sprintf(`
local SEP = '\31'
local SUBS, INDEX, PER, ACTIVE = %q, %q, %d, %q
local V1INDEX, V1ACTIVE, V1SUB = %q, %q, %q
local RECONF, SUPP, SOFT = %q, %q, %q
local TOPIC, KNOWN, ONBOARD = %q, %q, %q
local PUSH = %q
local STATUSPREFIX, CONSENT, MAILLOG, FBLOG, ERASED = %q, %q, %q, %q, %q
local DAYTTL, FBCAP = %d, %d
-- DAY is the key of today's counters (prefixDay), set by the scripts that
-- count (count); nil counts nothing.
local DAY = nil
local function subkey(id) return SUBS .. math.floor(tonumber(id) / PER) end
local function consentkey(id) return CONSENT .. math.floor(tonumber(id) / PER) end
-- statuskey is the bitmap of a status code (the active one is ACTIVE).
local function statuskey(code)
  if code == 'a' then return ACTIVE end
  return STATUSPREFIX .. code
end
-- count sets the day's expiry only when a field is first counted (once
-- per field a day): every count falls within the day the key names, so
-- the key lives at least DAYTTL from that day's first count, longer than
-- the overview looks back, without an EXPIRE on every count.
local function count(field)
  if not DAY then return end
  if redis.call('HINCRBY', DAY, field, 1) == 1 then redis.call('EXPIRE', DAY, DAYTTL) end
end
local function ixloc(email)
  local h = redis.sha1hex(email)
  return INDEX .. (tonumber(h:sub(1, 4), 16) %% 16384), h:sub(5, 16)
end
-- unpackrec also keeps the status the record was stored with (r.was), so
-- that save knows which status bit to move without reading the record
-- again: every script that saves a record read it first. packrec joins
-- only fields 1 to 7, so r.was is never stored.
local function unpackrec(v)
  local r = {}
  for f in (v .. SEP):gmatch('([^' .. SEP .. ']*)' .. SEP) do r[#r + 1] = f end
  r.was = r[1]
  return r
end
local function packrec(r) return table.concat(r, SEP, 1, 7) end
-- save writes a record and moves its bit between the status bitmaps
-- (statuskey) when its status changed: every status change goes through
-- here, so the bitmaps list the subscribers by status exactly, the active
-- one (ACTIVE) included. r.was is the status stored before (unpackrec);
-- nil for a record built by hand, which must be one that is not stored
-- yet (a new id, or a layout-1 subscriber being moved).
local function save(id, r)
  if r.was ~= r[1] then
    if r.was then redis.call('SETBIT', statuskey(r.was), id, 0) end
    redis.call('SETBIT', statuskey(r[1]), id, 1)
  end
  redis.call('HSET', subkey(id), id, packrec(r))
  r.was = r[1]
end
-- consent records how a subscription came in (src: form, import, api;
-- "" keeps the one recorded) and when it was asked for (base 36 ms).
local function consent(id, src, at)
  if src == '' then
    local v = redis.call('HGET', consentkey(id), id)
    if v then src = v:match('^([^' .. SEP .. ']*)') end
  end
  redis.call('HSET', consentkey(id), id, src .. SEP .. at)
end
-- logfeedback keeps a bounce or complaint report in the person's history.
local function logfeedback(id, typ, now)
  local k = FBLOG .. id
  redis.call('LPUSH', k, typ .. SEP .. now)
  redis.call('LTRIM', k, 0, FBCAP - 1)
end
local function index(email, id)
  local ix, f = ixloc(email)
  local ids = redis.call('HGET', ix, f)
  if ids then redis.call('HSET', ix, f, ids .. ',' .. id) else redis.call('HSET', ix, f, id) end
end
local function b36(s)
  if not s or s == '' then return '' end
  local n, d, out = tonumber(s), '0123456789abcdefghijklmnopqrstuvwxyz', ''
  repeat
    local k = n %% 36
    out = d:sub(k + 1, k + 1) .. out
    n = math.floor(n / 36)
  until n == 0
  return out
end
local CODES = {pending = 'p', active = 'a', unsubscribed = 'u', bounced = 'b'}
local function migrate(id)
  local key = V1SUB .. id
  local f = redis.call('HGETALL', key)
  if #f == 0 then return false end
  local h = {}
  for i = 1, #f, 2 do h[f[i]] = f[i + 1] end
  local r = {CODES[h.s] or 'p', b36(h.c), b36(h.cf), b36(h.u), h.e, h.n or '', h.tz or ''}
  save(id, r)
  index(h.e, id)
  redis.call('DEL', key)
  redis.call('HDEL', V1INDEX, h.e)
  redis.call('ZREM', V1ACTIVE, id)
  return true
end
-- unsuppress takes id off the suppression lists and forgets its soft
-- bounces: it is about to be mailed again, or may be.
local function unsuppress(id)
  redis.call('ZREM', SUPP .. 'b', id)
  redis.call('ZREM', SUPP .. 'c', id)
  redis.call('DEL', SOFT .. id)
end
-- Topic lists travel as one comma-separated argument: every topic id of
-- the topics file (all), or a choice among them. fresh: a new id, whose
-- bits are all still 0.
local function settopics(id, all, chosen, fresh)
  if not fresh then
    for t in all:gmatch('[^,]+') do redis.call('SETBIT', TOPIC .. t, id, 0) end
  end
  for t in chosen:gmatch('[^,]+') do redis.call('SETBIT', TOPIC .. t, id, 1) end
  redis.call('SETBIT', KNOWN, id, 1)
end
local function topicsof(id, all)
  local out = {}
  for t in all:gmatch('[^,]+') do
    if redis.call('GETBIT', TOPIC .. t, id) == 1 then out[#out + 1] = t end
  end
  return table.concat(out, ',')
end
-- reconfirming tells a suppressed subscriber whose own confirmation was
-- asked for (and not cancelled since): '1' or '0', as the scripts answer.
local function reconfirming(id, r)
  if r[1] ~= 'b' and r[1] ~= 'c' then return '0' end
  local v = redis.call('GET', RECONF .. id)
  if v and v ~= '' then return '1' end
  return '0'
end
-- cancelreconfirm voids a confirmation asked for a suppressed subscriber
-- but keeps its window: the address left or bounced again since.
local function cancelreconfirm(id)
  local k = RECONF .. id
  local ttl = redis.call('PTTL', k)
  if ttl > 0 then redis.call('SET', k, '', 'PX', ttl) end
end
local function find(email)
  local ix, f = ixloc(email)
  local ids = redis.call('HGET', ix, f)
  if ids then
    for id in ids:gmatch('[^,]+') do
      local v = redis.call('HGET', subkey(id), id)
      if v then
        local r = unpackrec(v)
        if r[5] == email then return id, r end
      end
    end
  end
  local old = redis.call('HGET', V1INDEX, email)
  if old and migrate(old) then return find(email) end
  return nil
end
`, prefixSubs, prefixIndex, subsPerBucket, keyActiveSet, v1EmailIndex, v1Active, v1PrefixSub, prefixReconfirm, prefixSupp, prefixSoft,
	prefixTopic, keyTopicKnown, keyOnboarding, prefixPush,
	prefixStatus, prefixConsent, prefixMailLog, prefixFeedbackLog, keyErased,
	int64(dayCounterTTL/time.Second), feedbackLogCap) + holdLua

// holdLua counts mail against a mailbox's allowance (ConfirmHold, keys
// from holdKeys).
//
//	takehold(cool, day, every, perday)  false when a mail was counted
//	    within every seconds or perday were counted in the last day
//	    (nothing is counted then); every <= 0 holds and counts nothing
const holdLua = `
local function takehold(cool, day, every, perday)
  every, perday = tonumber(every), tonumber(perday)
  if every <= 0 then return true end
  if redis.call('EXISTS', cool) == 1 then return false end
  local n = tonumber(redis.call('GET', day) or '0')
  if perday > 0 and n >= perday then return false end
  redis.call('SET', cool, '1', 'EX', every)
  n = redis.call('INCR', day)
  if n == 1 then redis.call('EXPIRE', day, 86400) end
  return true
end
`

// subscriberScript is a script with the subscriber prelude.
func subscriberScript(body string) *redis.Script { return redis.NewScript(subscriberLua + body) }

// subscribeScript adds an address or re-opens its ended subscription, and
// writes the outbox entry of the mail that the change calls for.
//
//	KEYS[1]  keySeq        id counter
//	KEYS[2]  keyActiveSet  bitmap of active ids (declared: save writes it as ACTIVE)
//	KEYS[3]  keyOutbox     hash outbox id -> body
//	KEYS[4]  keyOutboxDue  zset outbox id by due time
//	KEYS[5]  the mailbox's confirmation cooldown (holdKeys)
//	KEYS[6]  the mailbox's confirmations of the day (holdKeys)
//	ARGV[1]  email (normalised)
//	ARGV[2]  name, or ""
//	ARGV[3]  time zone, or ""
//	ARGV[4]  now, unix ms base 36
//	ARGV[5]  "1": activate at once (no double opt-in, import)
//	ARGV[6]  outbox id, or "": no outbox entry
//	ARGV[7]  outbox body
//	ARGV[8]  outbox due, unix ms
//	ARGV[9]  "1": only a new address (import); an existing one answers 'exists'
//	ARGV[10] confirmation cooldown, seconds; "0": none
//	ARGV[11] confirmations a day at most; "0": no cap
//	ARGV[12] every topic id, comma-separated
//	ARGV[13] the chosen topics, comma-separated
//	ARGV[14] now, unix ms (the onboarding index's score)
//	ARGV[15] ReconfirmWindow, ms
//	ARGV[16] the address's keyed hash (the erased marker, keyErased)
//	ARGV[17] the consent source: form, import, api, or ""
//	KEYS[7]  today's counters (prefixDay)
//
// An address not on the list whose hash is in keyErased was erased: an
// import (ARGV[9]) answers 'erased' and writes nothing; a signup goes on,
// and its activation (here, or by confirmScript) takes the hash off.
//
// Writes the topics (of a new, pending or ended subscription), the
// onboarding index when activated with the sequence's first step, the
// record (a new one: created now, the index entry; a re-opened one:
// confirmed and ended cleared), name and time zone when given (not for a
// pending one asked to confirm again: see below), the status
// and, when activated, confirmed and the active bit. Answers a code ('ok',
// 'active', 'exists', 'held', 'suppressed'), then the id, the packed
// record, the topics and whether the subscriber is reconfirming ('1').
// Also writes the consent (source, requested now) and counts the day's
// signup or import, and confirmation when activated (not for an import).
//
// A confirmation (not activated, with an outbox entry) is held when the
// mailbox's allowance says so (holdLua): the script then writes nothing at
// all, not even a new address, so repeated signups send no mail and cannot
// change the name the welcome will use.
//
// A pending subscriber signed up again without activation keeps its name,
// time zone, topics and consent: the signup only writes the confirmation
// again (within the allowance). Its choices change only by the person's
// own confirmation of them, so a stranger who knows the address cannot
// rewrite what the person's first link confirms.
//
// A suppressed subscriber (b, c) is never activated nor made pending
// here: a confirmation for it is written at most once per ReconfirmWindow
// (prefixReconfirm, which keeps the name, time zone and topics for the
// confirmation to apply); anything else answers 'suppressed'.
var subscribeScript = subscriberScript(`
DAY = KEYS[7]
local email = ARGV[1]
local confirm = ARGV[5] ~= '1' and ARGV[6] ~= ''
local id, r = find(email)
if not id and ARGV[9] == '1' and ARGV[16] ~= '' and redis.call('SISMEMBER', ERASED, ARGV[16]) == 1 then
  return {'erased'}
end
local suppressed = false
if id then
  if ARGV[9] == '1' then return {'exists', id, packrec(r), topicsof(id, ARGV[12]), reconfirming(id, r)} end
  if r[1] == 'a' then return {'active', id, packrec(r), topicsof(id, ARGV[12]), '0'} end
  suppressed = r[1] == 'b' or r[1] == 'c'
  if suppressed and not confirm then return {'suppressed', id, packrec(r), topicsof(id, ARGV[12]), reconfirming(id, r)} end
  if suppressed and redis.call('EXISTS', RECONF .. id) == 1 then
    return {'held', id, packrec(r), topicsof(id, ARGV[12]), reconfirming(id, r)}
  end
end
if confirm and not takehold(KEYS[5], KEYS[6], ARGV[10], ARGV[11]) then
  if id then return {'held', id, packrec(r), topicsof(id, ARGV[12]), reconfirming(id, r)} end
  return {'held'}
end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[6], ARGV[7])
  redis.call('ZADD', KEYS[4], ARGV[8], ARGV[6])
end
if suppressed then
  redis.call('SET', RECONF .. id, table.concat({'1', ARGV[2], ARGV[3], ARGV[13], ARGV[17], ARGV[4]}, SEP), 'PX', ARGV[15])
  count('signup')
  return {'ok', id, packrec(r), topicsof(id, ARGV[12]), '1'}
end
local fresh = not id
-- A pending subscriber signed up again (by the person, or by anyone who
-- knows the address) gets the confirmation again, of the choices it has:
-- they change only with the person's own confirmation, never by a signup
-- whose confirmation is still to come.
local keep = id and r[1] == 'p' and ARGV[5] ~= '1'
if id then
  r[3], r[4] = '', ''
else
  id = tostring(redis.call('INCR', KEYS[1]))
  r = {'p', ARGV[4], '', '', email, '', ''}
  index(email, id)
end
if ARGV[2] ~= '' and not keep then r[6] = ARGV[2] end
if ARGV[3] ~= '' and not keep then r[7] = ARGV[3] end
if ARGV[5] == '1' then
  r[1], r[3] = 'a', ARGV[4]
  if ARGV[6] ~= '' then redis.call('ZADD', ONBOARD, ARGV[14], id) end
else
  r[1] = 'p'
end
save(id, r)
if keep then
  count('signup')
  return {'ok', id, packrec(r), topicsof(id, ARGV[12]), '0'}
end
settopics(id, ARGV[12], ARGV[13], fresh)
consent(id, ARGV[17], ARGV[4])
count(ARGV[17] == 'import' and 'import' or 'signup')
if ARGV[5] == '1' and ARGV[9] ~= '1' then
  count('confirm')
  if ARGV[16] ~= '' then redis.call('SREM', ERASED, ARGV[16]) end
end
return {'ok', id, packrec(r), ARGV[13], '0'}
`)

// confirmScript activates a pending subscription, or a suppressed one
// whose confirmation was asked for (prefixReconfirm: its name, time zone
// and topics apply now, and it leaves the suppression list), and writes
// the welcome's outbox entry.
//
//	KEYS[1]  keyActiveSet (declared: save writes it as ACTIVE)
//	KEYS[2]  keyOutbox
//	KEYS[3]  keyOutboxDue
//	ARGV[1]  email
//	ARGV[2]  now, unix ms base 36
//	ARGV[3]  welcome outbox id
//	ARGV[4]  welcome outbox body
//	ARGV[5]  welcome due, unix ms
//	ARGV[6]  every topic id, comma-separated
//	ARGV[7]  now, unix ms (the onboarding index's score)
//	ARGV[8]  the address's keyed hash (the erased marker), or ""
//	KEYS[4]  today's counters (prefixDay)
//
// Writes status a, confirmed, the active bit and the onboarding index,
// counts the day's confirmation, takes the address off keyErased (the
// person's own confirmation brings them back after an erasure);
// for a suppressed one also name, time zone, topics, ended cleared, off
// the suppression lists, the reconfirmation key deleted. Answers 'ok',
// 'active' (already), 'notpending' or 'notfound', then the id, the record
// and the topics.
var confirmScript = subscriberScript(`
DAY = KEYS[4]
local id, r = find(ARGV[1])
if not id then return {'notfound'} end
if r[1] == 'a' then return {'active', id, packrec(r), topicsof(id, ARGV[6])} end
if r[1] == 'b' or r[1] == 'c' then
  local v = redis.call('GET', RECONF .. id)
  if not v or v == '' then return {'notpending', id, packrec(r), topicsof(id, ARGV[6])} end
  local f = unpackrec(v)
  if f[2] ~= '' then r[6] = f[2] end
  if f[3] ~= '' then r[7] = f[3] end
  settopics(id, ARGV[6], f[4] or '')
  if f[6] then consent(id, f[5] or '', f[6]) end
  unsuppress(id)
  redis.call('DEL', RECONF .. id)
  r[4] = ''
elseif r[1] ~= 'p' then
  return {'notpending', id, packrec(r), topicsof(id, ARGV[6])}
end
r[1], r[3] = 'a', ARGV[2]
save(id, r)
count('confirm')
if ARGV[8] ~= '' then redis.call('SREM', ERASED, ARGV[8]) end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[3])
  redis.call('ZADD', ONBOARD, ARGV[7], id)
end
return {'ok', id, packrec(r), topicsof(id, ARGV[6])}
`)

// endScript moves a subscription to unsubscribed or bounced and drops the
// outbox entries of mails that must no longer go. Bounced wins over
// unsubscribed: an address that bounced must not be mailed even if the
// person later asks to leave. Complained wins over both.
//
//	KEYS[1]  keyActiveSet
//	KEYS[2]  keyOutbox
//	KEYS[3]  keyOutboxDue
//	ARGV[1]  email
//	ARGV[2]  now, unix ms base 36
//	ARGV[3]  the new status: 'u' or 'b'
//	ARGV[4]  every topic id, comma-separated
//	ARGV[5…] outbox ids to drop
//	KEYS[4]  today's counters (prefixDay)
//
// Counts the day's unsubscribe or bounce when the status changes. Writes
// the status, ended, the suppression list (bounced), and clears the
// active bit and the topics; a confirmation asked for a suppressed address
// is cancelled (cancelreconfirm); leaving ('u') also deletes the browsers
// for web push (a bounce keeps them unused: it was no choice of the
// person). Answers 'ok' or 'notfound', then the id, the record, the (no)
// topics, an empty field (not reconfirming), and '1' when this call changed the status
// ('0' when it was already ended so): the caller tells news from a link
// used again by that, not by the time.
var endScript = subscriberScript(`
DAY = KEYS[4]
local id, r = find(ARGV[1])
if not id then return {'notfound'} end
cancelreconfirm(id)
local changed = '0'
if r[1] ~= 'c' and (ARGV[3] == 'b' or (r[1] ~= 'u' and r[1] ~= 'b')) then
  if r[1] ~= ARGV[3] then
    count(ARGV[3] == 'b' and 'bounce' or 'unsubscribe')
    changed = '1'
  end
  r[1], r[4] = ARGV[3], ARGV[2]
  save(id, r)
  if ARGV[3] == 'b' then redis.call('ZADD', SUPP .. 'b', id, id) end
end
redis.call('SETBIT', KEYS[1], id, 0)
settopics(id, ARGV[4], '')
if ARGV[3] == 'u' then redis.call('DEL', PUSH .. id) end
for i = 5, #ARGV do
  redis.call('HDEL', KEYS[2], ARGV[i])
  redis.call('ZREM', KEYS[3], ARGV[i])
end
return {'ok', id, packrec(r), '', '', changed}
`)

// topicsScript changes an active subscriber's topics: replaces them, or
// turns one off. No topic left ends the subscription, as endScript does
// for 'u'; leaving the sequence's topic drops its outbox entries.
//
//	KEYS[1]  keyActiveSet (declared: save writes it as ACTIVE)
//	KEYS[2]  keyOutbox
//	KEYS[3]  keyOutboxDue
//	ARGV[1]  email
//	ARGV[2]  now, unix ms base 36
//	ARGV[3]  every topic id, comma-separated
//	ARGV[4]  'set': ARGV[5] is the new choice; 'leave': ARGV[5] is the topic to turn off
//	ARGV[5]  topics, comma-separated
//	ARGV[6]  the sequence's topic
//	ARGV[7]  'set': the name
//	ARGV[8]  'set': the time zone
//	ARGV[9…] the sequence's outbox ids
//	KEYS[4]  today's counters (prefixDay)
//
// Writes the topics, with 'set' the name and time zone, and, with no topic
// left, status u, ended, the active bit and the browsers for web push.
// Answers 'ok', 'notactive' or 'notfound', then the id, the record and the
// topics.
var topicsScript = subscriberScript(`
DAY = KEYS[4]
local id, r = find(ARGV[1])
if not id then return {'notfound'} end
if r[1] ~= 'a' then return {'notactive', id, packrec(r), topicsof(id, ARGV[3])} end
local chosen = ARGV[5]
if ARGV[4] == 'leave' then
  local keep = {}
  for t in topicsof(id, ARGV[3]):gmatch('[^,]+') do
    if t ~= ARGV[5] then keep[#keep + 1] = t end
  end
  chosen = table.concat(keep, ',')
end
settopics(id, ARGV[3], chosen)
if ARGV[4] == 'set' then r[6], r[7] = ARGV[7], ARGV[8] end
if chosen == '' then
  r[1], r[4] = 'u', ARGV[2]
  count('unsubscribe')
  redis.call('DEL', PUSH .. id)
end
save(id, r)
if not (',' .. chosen .. ','):find(',' .. ARGV[6] .. ',', 1, true) then
  for i = 9, #ARGV do
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('ZREM', KEYS[3], ARGV[i])
  end
end
return {'ok', id, packrec(r), chosen}
`)

// getScript looks a subscriber up by address (migrating a layout-1 one on
// the way).
//
//	ARGV[1]  email
//	ARGV[2]  every topic id, comma-separated
//
// Answers 'ok', the id, the record, the topics and whether it is
// reconfirming, or 'notfound'.
var getScript = subscriberScript(`
local id, r = find(ARGV[1])
if not id then return {'notfound'} end
return {'ok', id, packrec(r), topicsof(id, ARGV[2]), reconfirming(id, r)}
`)

// getByIDScript looks a subscriber up by id (migrating a layout-1 one on
// the way), answering as getScript does.
//
//	ARGV[1]  id
//	ARGV[2]  every topic id, comma-separated
//
// Answers 'ok', the id, the record, the topics and whether a confirmation
// of a suppressed address waits, or 'notfound'.
var getByIDScript = subscriberScript(`
local id = ARGV[1]
local v = redis.call('HGET', subkey(id), id)
if not v and migrate(id) then v = redis.call('HGET', subkey(id), id) end
if not v then return {'notfound'} end
return {'ok', id, v, topicsof(id, ARGV[2]), reconfirming(id, unpackrec(v))}
`)

// migrateScript moves the layout-1 subscribers with ids in a range to
// layout 2 (migrate.go). A subscriber already moved has no layout-1 key
// left, so a range run again changes nothing.
//
//	ARGV[1]  first id
//	ARGV[2]  last id
//
// Answers how many it moved.
var migrateScript = subscriberScript(`
local n = 0
for id = tonumber(ARGV[1]), tonumber(ARGV[2]) do
  if migrate(tostring(id)) then n = n + 1 end
end
return n
`)

// claimLua is the prelude of the claim scripts. A claim records its owner,
// the task that took it: a retry of that task (after its attempt died with
// Redis away, say) takes its own claims over at once, and only a different,
// possibly live, run waits for them to expire. An empty owner owns nothing.
//
//	held(v, owner)  whether claim value v ("<expiry ms>:<owner>", or the
//	                older "<expiry ms>") keeps owner out at time now
const claimLua = `
local now, ttl, owner = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local function held(v)
  if not v then return false end
  local exp, own = string.match(v, '^(%d+):?(.*)$')
  if not exp or tonumber(exp) <= now then return false end
  return owner == '' or own ~= owner
end
`

// claimScript claims delivery marks (see markKeys), all of a batch in one
// call. A shared mark's claim is a field of one hash per kind and key
// whose value is its expiry and owner: a key with its own expiry per
// recipient cost Redis more than all else a digest mail needs of it.
//
//	KEYS[2i-1]  mark i's sent mark: a bitmap for shared marks, a string otherwise
//	KEYS[2i]    mark i's claim: the claims hash for shared marks, a string
//	            "<owner>" with an expiry otherwise
//	ARGV[1]     now, unix ms
//	ARGV[2]     claim ttl, ms
//	ARGV[3]     owner (the asynq task ID; "" for none)
//	ARGV[2i+2]  "1": mark i is shared (bit and field ARGV[2i+3])
//	ARGV[2i+3]  mark i's subscriber id
//
// Writes the claims it takes, and gives each claims hash an expiry of
// twice the ttl past its latest claim. Answers one code per mark: 0
// claimed, 1 already sent, 2 held by another run (the store.Claim values).
var claimScript = redis.NewScript(claimLua + `
local out, hashes = {}, {}
for i = 1, #KEYS / 2 do
  local sent, claim, id = KEYS[2*i-1], KEYS[2*i], ARGV[2*i+3]
  local code
  if ARGV[2*i+2] == '1' then
    if redis.call('GETBIT', sent, id) == 1 then
      code = 1
    elseif held(redis.call('HGET', claim, id)) then
      code = 2
    else
      redis.call('HSET', claim, id, (now + ttl) .. ':' .. owner)
      hashes[claim] = true
      code = 0
    end
  elseif redis.call('EXISTS', sent) == 1 then
    code = 1
  elseif redis.call('SET', claim, owner, 'NX', 'PX', ttl) then
    code = 0
  elseif owner ~= '' and redis.call('GET', claim) == owner then
    redis.call('SET', claim, owner, 'PX', ttl)
    code = 0
  else
    code = 2
  end
  out[i] = code
end
for h in pairs(hashes) do redis.call('PEXPIRE', h, 2 * ttl) end
return out
`)

// claimSharedScript is claimScript for a batch of shared marks of one kind
// and key (a digest batch): three calls for the whole batch instead of
// three per mark. It reads the batch's stretch of the sent bitmap at once
// (ids of a batch are close together; far apart, it asks bit by bit). The
// ids must be distinct.
//
//	KEYS[1]  the sent bitmap
//	KEYS[2]  the claims hash
//	ARGV[1]  now, unix ms
//	ARGV[2]  claim ttl, ms
//	ARGV[3]  owner (the asynq task ID; "" for none)
//	ARGV[4…] subscriber ids
//
// Writes the claims it takes and gives the claims hash an expiry of twice
// the ttl. Answers one code per id, as claimScript.
var claimSharedScript = redis.NewScript(claimLua + `
local n = #ARGV - 3
local ids, lo, hi = {}, math.huge, -1
for i = 1, n do
  local id = tonumber(ARGV[i + 3])
  ids[i] = id
  if id < lo then lo = id end
  if id > hi then hi = id end
end
local first, last = math.floor(lo / 8), math.floor(hi / 8)
local bytes
if last - first < 65536 then bytes = redis.call('GETRANGE', KEYS[1], first, last) end
local exps = redis.call('HMGET', KEYS[2], unpack(ARGV, 4))
-- bit 0 is the high bit of the first byte
local weight = {128, 64, 32, 16, 8, 4, 2, 1}
-- Every claim taken now has the same value: made once, not per id.
local value = (now + ttl) .. ':' .. owner
local out, take = {}, {}
for i = 1, n do
  local id, sent = ids[i], false
  if bytes then
    local b = bytes:byte(math.floor(id / 8) - first + 1)
    sent = b ~= nil and math.floor(b / weight[id % 8 + 1]) % 2 == 1
  else
    sent = redis.call('GETBIT', KEYS[1], id) == 1
  end
  if sent then
    out[i] = 1
  elseif held(exps[i]) then
    out[i] = 2
  else
    out[i] = 0
    take[#take + 1] = ARGV[i + 3]
    take[#take + 1] = value
  end
end
if #take > 0 then
  redis.call('HSET', KEYS[2], unpack(take))
  redis.call('PEXPIRE', KEYS[2], 2 * ttl)
end
return out
`)

// addItemScript numbers and stores a digest item in one step, so items
// become visible in id order and a run never skips an id that appears
// later.
//
//	KEYS[1]  keyItemSeq   item id counter
//	KEYS[2]  the item's topic's zset of item ids (keyItems for the digest)
//	ARGV[1]  prefixItem
//	ARGV[2]  title
//	ARGV[3]  url
//	ARGV[4]  summary
//	ARGV[5]  published, unix ms
//	ARGV[6]  topic
//
// Writes the item hash: t title, u url, s summary, p published, tp topic.
// Answers the new id.
var addItemScript = redis.NewScript(`
local id = redis.call('INCR', KEYS[1])
redis.call('HSET', ARGV[1] .. id, 't', ARGV[2], 'u', ARGV[3], 's', ARGV[4], 'p', ARGV[5], 'tp', ARGV[6])
redis.call('ZADD', KEYS[2], id, id)
return id
`)

// saveFeedScript records one poll of a feed: new entries become items of
// the feed's topic, once each by entry id, in the same step as the
// validators that make the next poll conditional, so a crash can neither
// lose an entry behind a 304 nor add one twice.
//
//	KEYS[1]  prefixFeed .. feedKey           the feed's state hash
//	KEYS[2]  prefixFeed .. feedKey .. :seen  zset of entry ids, score = last seen
//	KEYS[3]  keyItemSeq
//	KEYS[4]  the topic's zset of item ids
//	ARGV[1]  now, unix ms
//	ARGV[2]  state lifetime, ms
//	ARGV[3]  entry ids kept (FeedSeenCap)
//	ARGV[4]  prefixItem
//	ARGV[5]  topic
//	ARGV[6]  ETag
//	ARGV[7]  Last-Modified
//	ARGV[8…] per entry, five: id, published (unix ms, 0 unknown), title, url, summary
//
// Before the state's base is set (the first saved poll), an entry becomes
// an item only if published after reg. Writes the state's etag, lm and
// base. Answers the number of items added.
var saveFeedScript = redis.NewScript(`
local base = redis.call('HGET', KEYS[1], 'base') == '1'
local reg = tonumber(redis.call('HGET', KEYS[1], 'reg') or ARGV[1])
local added = 0
for i = 8, #ARGV, 5 do
  local new = redis.call('ZADD', KEYS[2], ARGV[1], ARGV[i]) == 1
  if new and (base or tonumber(ARGV[i+1]) > reg) then
    local id = redis.call('INCR', KEYS[3])
    redis.call('HSET', ARGV[4] .. id, 't', ARGV[i+2], 'u', ARGV[i+3], 's', ARGV[i+4], 'p', ARGV[1], 'tp', ARGV[5])
    redis.call('ZADD', KEYS[4], id, id)
    added = added + 1
  end
end
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[3]) + 1))
redis.call('HSET', KEYS[1], 'reg', reg, 'etag', ARGV[6], 'lm', ARGV[7], 'base', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return added
`)

// startRunScript creates a period's digest run once, fixing its items
// (those after the last item any run took) and its audience.
//
//	KEYS[1]  prefixRun .. period   the run hash
//	KEYS[2]  keyLastItem           highest item id any run took
//	KEYS[3]  keyItems
//	KEYS[4]  keyActiveSet          bitmap of active ids
//	KEYS[5]  keyLatestRun          period of the latest run
//	KEYS[6]  prefixTopic .. digest bitmap of the digest topic's ids
//	KEYS[7]  a scratch key, deleted before the script ends
//	ARGV[1]  now, unix ms
//	ARGV[2]  period
//
// Writes the run hash: items (comma-separated ids), created, audience (the
// active subscribers of the digest topic), cursor, planned, state, and
// as_issue (the run is sent as an issue: DigestRun.AsIssue). Answers
// 1 when it created the run, 0 when the run existed.
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
-- Counting the intersection takes a copy of the bitmaps' size (an
-- eighth of a byte per subscriber) for the length of this script only.
redis.call('BITOP', 'AND', KEYS[7], KEYS[4], KEYS[6])
local audience = redis.call('BITCOUNT', KEYS[7])
redis.call('DEL', KEYS[7])
redis.call('HSET', KEYS[1], 'items', table.concat(ids, ','), 'created', ARGV[1],
  'audience', audience, 'cursor', 0, 'planned', 0, 'state', state, 'as_issue', 1)
redis.call('SET', KEYS[5], ARGV[2])
return 1
`)

// advanceRunScript saves the planner's progress after a page, once: a page
// whose cursor is not past the saved one was counted already (the planner
// sent it again after a lost answer, or a second planner ran it), and only
// its done flag still counts.
//
//	KEYS[1]  prefixRun .. period   the run hash
//	ARGV[1]  cursor (the page's last id)
//	ARGV[2]  recipients in the page
//	ARGV[3]  RunPlanned when planning is done, else ""
//	ARGV[4]  now, unix ms
//
// Writes the run hash's cursor, planned and, when done, state and
// planned_at.
var advanceRunScript = redis.NewScript(`
if tonumber(ARGV[1]) > tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0') then
  redis.call('HSET', KEYS[1], 'cursor', ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'planned', ARGV[2])
end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'state', ARGV[3], 'planned_at', ARGV[4])
end
return 1
`)

// feedbackScript applies one bounce or complaint report to a subscriber,
// once: hard bounce → bounced; soft bounce → counted, bounced at the limit
// within the window; complaint → complained (which nothing overrides).
//
//	KEYS[1]  keyActiveSet
//	KEYS[2]  keyLatestRun   period of the latest digest run
//	ARGV[1]  email, or "" (then ARGV[2])
//	ARGV[2]  subscriber id, or "" (then ARGV[1]); both: they must agree
//	ARGV[3]  'hard', 'soft' or 'complaint'
//	ARGV[4]  now, unix ms
//	ARGV[5]  now, unix ms base 36 (the record's ended field)
//	ARGV[6]  report id ("" : not deduplicated)
//	ARGV[7]  soft bounces that make a bounce
//	ARGV[8]  soft-bounce window, ms
//	ARGV[9]  "1": count it against the latest digest run
//	ARGV[10] every topic id, comma-separated
//	ARGV[11] the issue the mail was, or "": count it against that issue
//	KEYS[3]  today's counters (prefixDay)
//
// Keeps the report in the person's history (logfeedback) and counts the
// day's bounce or complaint when the status changes. Writes the seen key of the report (30 days), the soft-bounce zset, the
// status, ended, the suppression lists, the active bit, a cancelled
// reconfirmation (cancelreconfirm), the topics (an ended subscription has
// none, as after endScript), and the run's or the issue's bounces or
// complaints counter (an issue that no longer exists counts nothing).
// Answers 'duplicate', 'notfound', or 'ok' / 'changed' with the id, the
// record, the soft-bounce count and the topics.
var feedbackScript = subscriberScript(fmt.Sprintf(`
local SEEN, RUN, ISSUE = %q, %q, %q
DAY = KEYS[3]
local now = tonumber(ARGV[4])
if ARGV[6] ~= '' and not redis.call('SET', SEEN .. ARGV[6], '1', 'NX', 'EX', 2592000) then
  return {'duplicate'}
end
local id, r
if ARGV[2] ~= '' then
  local v = redis.call('HGET', subkey(ARGV[2]), ARGV[2])
  if v then
    id, r = ARGV[2], unpackrec(v)
    if ARGV[1] ~= '' and r[5] ~= ARGV[1] then id = nil end
  end
else
  id, r = find(ARGV[1])
end
if not id then return {'notfound'} end
logfeedback(id, ARGV[3], ARGV[4])
local to, soft = nil, 0
if ARGV[3] == 'complaint' then
  to = 'c'
elseif ARGV[3] == 'hard' then
  to = 'b'
else
  local k = SOFT .. id
  local member = ARGV[6] ~= '' and ARGV[6] or tostring(now)
  redis.call('ZADD', k, now, member)
  redis.call('ZREMRANGEBYSCORE', k, '-inf', now - tonumber(ARGV[8]))
  redis.call('PEXPIRE', k, ARGV[8])
  soft = redis.call('ZCARD', k)
  if soft >= tonumber(ARGV[7]) then to = 'b' end
end
local code = 'ok'
-- A report about the confirmation mailed to a suppressed address (or any
-- that suppresses) voids that confirmation.
if to then cancelreconfirm(id) end
if to and r[1] ~= 'c' and r[1] ~= to then
  r[1], r[4] = to, ARGV[5]
  save(id, r)
  -- save cleared the active bit only if the record was active; this
  -- clears it whatever the status was, as endScript does: a suppressed id
  -- must be in no audience even if a stray bit was left behind.
  redis.call('SETBIT', KEYS[1], id, 0)
  redis.call('ZADD', SUPP .. to, id, id)
  if to == 'c' then redis.call('ZREM', SUPP .. 'b', id) end
  count(to == 'c' and 'complaint' or 'bounce')
  code = 'changed'
end
if r[1] == 'b' or r[1] == 'c' then settopics(id, ARGV[10], '') end
if ARGV[9] == '1' then
  local period = redis.call('GET', KEYS[2])
  if period then
    redis.call('HINCRBY', RUN .. period, ARGV[3] == 'complaint' and 'complaints' or 'bounces', 1)
  end
end
if ARGV[11] ~= '' and redis.call('EXISTS', ISSUE .. ARGV[11]) == 1 then
  redis.call('HINCRBY', ISSUE .. ARGV[11], ARGV[3] == 'complaint' and 'complaints' or 'bounces', 1)
end
return {code, id, packrec(r), tostring(soft), topicsof(id, ARGV[10])}
`, prefixSeen, prefixRun, prefixIssue))

// liftScript takes an address off the suppression list by hand. A bounced
// address that had confirmed is active again (a bounce is no choice of the
// person); a complaint is theirs, so that address becomes unsubscribed and
// only its own confirmation brings it back. The suppression took the
// topics away; the address made active again gets the default ones.
//
//	KEYS[1]  keyActiveSet (declared: save writes it as ACTIVE)
//	ARGV[1]  email
//	ARGV[2]  every topic id, comma-separated
//	ARGV[3]  the default topics, comma-separated
//
// Writes the status, the active bit, the topics, the suppression lists
// and forgets the soft bounces and any confirmation asked for (the address
// is out of the suppression's rules now). Answers 'ok', 'notsuppressed' or
// 'notfound', then the id, the record and the topics.
var liftScript = subscriberScript(`
local id, r = find(ARGV[1])
if not id then return {'notfound'} end
if r[1] ~= 'b' and r[1] ~= 'c' then return {'notsuppressed', id, packrec(r), topicsof(id, ARGV[2])} end
if r[1] == 'b' and r[3] ~= '' then
  r[1], r[4] = 'a', ''
  settopics(id, ARGV[2], ARGV[3])
else
  r[1] = 'u'
  settopics(id, ARGV[2], '')
end
save(id, r)
unsuppress(id)
redis.call('DEL', RECONF .. id)
return {'ok', id, packrec(r), topicsof(id, ARGV[2])}
`)

// fillSuppressionsScript puts the bounced and complained subscribers of a
// range of ids on the suppression lists: those written by a version that
// had no lists (migrate.go). Adding one twice changes nothing.
//
//	ARGV[1]  first id
//	ARGV[2]  last id
//
// Answers how many it found.
var fillSuppressionsScript = subscriberScript(`
local n = 0
for b = math.floor(tonumber(ARGV[1]) / PER), math.floor(tonumber(ARGV[2]) / PER) do
  local f = redis.call('HGETALL', SUBS .. b)
  for i = 1, #f, 2 do
    local st = f[i + 1]:sub(1, 1)
    if st == 'b' or st == 'c' then
      redis.call('ZADD', SUPP .. st, f[i], f[i])
      n = n + 1
    end
  end
end
return n
`)

// fillTopicsScript gives the subscribers of a range of ids who have no
// topics written yet (those from before topics existed) the default
// topics when pending or active, and records every one it looked at as
// known: a subscriber whose topics a person chose since is never
// touched, and a range run again changes nothing (migrate.go).
//
//	ARGV[1]  first id
//	ARGV[2]  last id
//	ARGV[3]  every topic id, comma-separated
//	ARGV[4]  the default topics, comma-separated
//
// Answers how many it gave topics.
var fillTopicsScript = subscriberScript(`
local n = 0
for b = math.floor(tonumber(ARGV[1]) / PER), math.floor(tonumber(ARGV[2]) / PER) do
  local f = redis.call('HGETALL', SUBS .. b)
  for i = 1, #f, 2 do
    local id = tonumber(f[i])
    if id >= tonumber(ARGV[1]) and id <= tonumber(ARGV[2]) and redis.call('GETBIT', KNOWN, id) == 0 then
      local st = f[i + 1]:sub(1, 1)
      if st == 'a' or st == 'p' then
        settopics(id, ARGV[3], ARGV[4])
        n = n + 1
      else
        settopics(id, ARGV[3], '')
      end
    end
  end
end
return n
`)

// takeHoldScript counts one mail against a mailbox's allowance (holdLua).
//
//	KEYS[1]  the mailbox's cooldown (holdKeys)
//	KEYS[2]  the mailbox's count of the day (holdKeys)
//	ARGV[1]  cooldown, seconds
//	ARGV[2]  mails a day at most; "0": no cap
//
// Writes both keys when it counts. Answers 1 (counted) or 0 (held).
var takeHoldScript = redis.NewScript(holdLua + `
if takehold(KEYS[1], KEYS[2], ARGV[1], ARGV[2]) then return 1 end
return 0
`)

// giveBackHoldScript undoes the last count of a mailbox's allowance: the
// mail was never sent. For a confirmation it also gives a suppressed
// subscriber's reconfirmation window back.
//
//	KEYS[1]  the mailbox's cooldown (holdKeys)
//	KEYS[2]  the mailbox's count of the day (holdKeys)
//	ARGV[1]  the address whose reconfirmation to forget, or ""
//
// Deletes the cooldown, decrements the count (not below 0), deletes the
// reconfirmation key of a suppressed subscriber. Answers 1.
var giveBackHoldScript = subscriberScript(`
redis.call('DEL', KEYS[1])
if tonumber(redis.call('GET', KEYS[2]) or '0') > 0 then redis.call('DECR', KEYS[2]) end
if ARGV[1] ~= '' then
  local id, r = find(ARGV[1])
  if id and (r[1] == 'b' or r[1] == 'c') then redis.call('DEL', RECONF .. id) end
end
return 1
`)

// listScript reads one page of subscribers in id order after a cursor
// (ListSubscribers). With filters it walks the filters' bitmaps a stretch
// at a time (a status's, a topic's, or both ANDed), skipping empty bytes
// in C (string.find), so a page of a million costs what a page of a
// thousand does; without, it walks the record buckets from the cursor.
//
//	KEYS[1]  the first filter's bitmap (statusBitmap or a topic's), or none
//	KEYS[2]  the second filter's bitmap, ANDed with the first, or none
//	ARGV[1]  after: the last id of the previous page (0 from the start)
//	ARGV[2]  limit
//	ARGV[3]  every topic id, comma-separated
//
// Writes nothing. Answers, per subscriber, its id, record and topics.
var listScript = subscriberScript(fmt.Sprintf(`
local SEQ = %q
local after, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local out, n = {}, 0
local function emit(id)
  local sid = tostring(id)
  local v = redis.call('HGET', subkey(sid), sid)
  if v then
    out[#out + 1] = sid
    out[#out + 1] = v
    out[#out + 1] = topicsof(sid, ARGV[3])
    n = n + 1
  end
end
if #KEYS == 0 then
  local last = tonumber(redis.call('GET', SEQ) or '0')
  local b = math.floor((after + 1) / PER)
  while n < limit and b * PER <= last do
    local f = redis.call('HGETALL', SUBS .. b)
    local ids = {}
    for i = 1, #f, 2 do
      local id = tonumber(f[i])
      if id > after then ids[#ids + 1] = id end
    end
    table.sort(ids)
    for _, id in ipairs(ids) do
      if n >= limit then break end
      emit(id)
    end
    b = b + 1
  end
  return out
end
-- bit 0 is the high bit of the first byte
local weight = {128, 64, 32, 16, 8, 4, 2, 1}
local CHUNK = 4096
local stop = redis.call('STRLEN', KEYS[1])
if #KEYS == 2 then stop = math.min(stop, redis.call('STRLEN', KEYS[2])) end
local first = math.floor((after + 1) / 8)
for at = first, stop - 1, CHUNK do
  if n >= limit then break end
  local a = redis.call('GETRANGE', KEYS[1], at, at + CHUNK - 1)
  local t = nil
  if #KEYS == 2 then t = redis.call('GETRANGE', KEYS[2], at, at + CHUNK - 1) end
  local i = 1
  while n < limit do
    i = a:find('[^%%z]', i)
    if not i then break end
    local x, y = a:byte(i), 255
    if t then y = t:byte(i) or 0 end
    if y ~= 0 then
      local base = (at + i - 1) * 8
      for k = 1, 8 do
        if n >= limit then break end
        local w = weight[k]
        if math.floor(x / w) %% 2 == 1 and math.floor(y / w) %% 2 == 1 and base + k - 1 > after then
          emit(base + k - 1)
        end
      end
    end
    i = i + 1
  end
end
return out
`, keySeq))

// eraseScript forgets one person (Erase): everything keyed by their id or
// address goes, and only the address's keyed hash stays.
//
//	KEYS[1]  keyOutbox
//	KEYS[2]  keyOutboxDue
//	KEYS[3]  today's counters (prefixDay)
//	KEYS[4]  keyErased
//	KEYS[5…8] the mailbox's allowances: confirm cooldown and day, unsubscribe cooldown and day (holdKeys)
//	ARGV[1]  email
//	ARGV[2]  the address's keyed hash
//	ARGV[3]  every topic id, comma-separated
//	ARGV[4…] outbox ids to drop (the person's pending tasks)
//
// Deletes the record, its address index entry, its status and topic
// bits, the topics-known bit, the consent, the mail and feedback logs,
// the soft bounces, the reconfirmation, the push subscriptions, the
// onboarding and suppression entries, the allowances and the outbox
// entries; adds the hash to keyErased and counts the day's erasure. The
// shared delivery marks keep the id's bit: an id is never given again,
// and a bit names nobody. Answers 'ok', the id and the record as they
// were, or 'notfound'.
var eraseScript = subscriberScript(`
DAY = KEYS[3]
local id, r = find(ARGV[1])
if not id then return {'notfound'} end
local ix, f = ixloc(ARGV[1])
local keep = {}
for x in (redis.call('HGET', ix, f) or ''):gmatch('[^,]+') do
  if x ~= id then keep[#keep + 1] = x end
end
if #keep == 0 then redis.call('HDEL', ix, f) else redis.call('HSET', ix, f, table.concat(keep, ',')) end
redis.call('SETBIT', statuskey(r[1]), id, 0)
-- The active bit too, whatever the status (statuskey covers it only for
-- an active record): an erased id must be in no audience.
redis.call('SETBIT', ACTIVE, id, 0)
redis.call('HDEL', subkey(id), id)
settopics(id, ARGV[3], '')
redis.call('SETBIT', KNOWN, id, 0)
redis.call('HDEL', consentkey(id), id)
redis.call('DEL', MAILLOG .. id, FBLOG .. id, SOFT .. id, RECONF .. id, PUSH .. id)
redis.call('ZREM', ONBOARD, id)
redis.call('ZREM', SUPP .. 'b', id)
redis.call('ZREM', SUPP .. 'c', id)
redis.call('DEL', KEYS[5], KEYS[6], KEYS[7], KEYS[8])
for i = 4, #ARGV do
  redis.call('HDEL', KEYS[1], ARGV[i])
  redis.call('ZREM', KEYS[2], ARGV[i])
end
redis.call('SADD', KEYS[4], ARGV[2])
count('erase')
return {'ok', id, packrec(r)}
`)

// statsScript counts the subscribers of each status and topic (Stats):
// BITCOUNT of each bitmap, and of each topic's AND the active one (in a
// scratch key, deleted before the script ends).
//
//	KEYS[1…n]  the status bitmaps (statusBitmap)
//	KEYS[n+1…] the topic bitmaps
//	ARGV[1]    n
//	ARGV[2]    keyActiveSet
//
// Answers the n status counts, then per topic its count and its active
// count.
var statsScript = redis.NewScript(fmt.Sprintf(`
local SCRATCH = %q
local out, ns = {}, tonumber(ARGV[1])
for i = 1, ns do out[#out + 1] = redis.call('BITCOUNT', KEYS[i]) end
for i = ns + 1, #KEYS do
  out[#out + 1] = redis.call('BITCOUNT', KEYS[i])
  redis.call('BITOP', 'AND', SCRATCH, KEYS[i], ARGV[2])
  out[#out + 1] = redis.call('BITCOUNT', SCRATCH)
end
redis.call('DEL', SCRATCH)
return out
`, keyStatsScratch))

// fillStatusScript sets the status bits of the subscribers of a range of
// ids written before the status bitmaps existed (migrate.go). save()
// keeps them from then on; a bit set twice changes nothing.
//
//	ARGV[1]  first id
//	ARGV[2]  last id
//
// Answers how many it looked at.
var fillStatusScript = subscriberScript(`
local n = 0
for b = math.floor(tonumber(ARGV[1]) / PER), math.floor(tonumber(ARGV[2]) / PER) do
  local f = redis.call('HGETALL', SUBS .. b)
  for i = 1, #f, 2 do
    local id = tonumber(f[i])
    if id >= tonumber(ARGV[1]) and id <= tonumber(ARGV[2]) then
      redis.call('SETBIT', statuskey(f[i + 1]:sub(1, 1)), id, 1)
      n = n + 1
    end
  end
end
return n
`)
