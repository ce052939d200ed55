package store

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Every state change of the Redis store is one Lua script, so it is atomic:
// a concurrent subscribe and unsubscribe of one address end in the state of
// whichever ran last, never a mix. Each script sits above the method that
// runs it, with a table of its KEYS and ARGV and of what it writes; this
// file holds the Lua they share. The key layout and the subscriber record
// are in keys.go.
//
// The subscriber scripts run in one shard (shard.go): KEYS[1] is the
// shard's anchor (anchor), and they build every other key of the shard
// themselves from its prefix (the record's bucket from an id, the index
// bucket from a hash of the address), so on a Redis Cluster they touch
// keys of one slot only. A subscriber's id carries its shard; one of
// another shard is never read here (find answers it as away).

// subscriberLua is the prelude of the scripts that read or write
// subscribers: the record format and the address index of keys.go.
var subscriberLua = fmt.Sprintf(`
local SEP = '\31'
local PFX = string.match(KEYS[1], '^nl:{s%%d+}:')
local SH = tonumber(string.match(PFX, '{s(%%d+)}'))
-- HOME: the shard is the address's home (KEYS[1] is its id counter),
-- not one its index pointed to (KEYS[1] is the visit anchor, anchor()).
local HOME = KEYS[1] == PFX .. %q
local NSH, PER = %d, %d
local SUBS, INDEX, ACTIVE = PFX .. %q, PFX .. %q, PFX .. %q
local RECONF, SUPP, SOFT = PFX .. %q, PFX .. %q, PFX .. %q
local TOPIC, KNOWN, ONBOARD = PFX .. %q, PFX .. %q, PFX .. %q
local PUSH, SEEN, DEVICES, PHONE = PFX .. %q, PFX .. %q, PFX .. %q, PFX .. %q
local CHANNELS, CHOSE, PHONECODE = PFX .. %q, PFX .. %q, PFX .. %q
local STATUSPREFIX, CONSENT, MAILLOG, FBLOG, ERASED = PFX .. %q, PFX .. %q, PFX .. %q, PFX .. %q, PFX .. %q
local OUTBOX, DUE, SEQ = PFX .. %q, PFX .. %q, PFX .. %q
local SEARCH = PFX .. %q
local DAYTTL, FBCAP, IXBUCKETS = %d, %d, %d
-- DAY is the key of today's counters (sfxDay), set by the scripts that
-- count (count); nil counts nothing.
local DAY = nil
-- slot is an id's bit in the shard's bitmaps; mine tells an id of this
-- shard.
local function slot(id) return math.floor(tonumber(id) / NSH) end
local function mine(id) return tonumber(id) %% NSH == SH end
local function subkey(id) return SUBS .. math.floor(slot(id) / PER) end
local function consentkey(id) return CONSENT .. math.floor(slot(id) / PER) end
-- newid takes the shard's next id: the n-th is n * NSH + SH.
local function newid() return tostring(redis.call('INCR', SEQ) * NSH + SH) end
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
-- grow counts a subscription that became active, once for each of its
-- topics (list, comma-separated), by how it came in (src: the consent's
-- source; 'other' for one from before sources were recorded): the
-- day's field g:<source>:<topic>, a topic's growth (Growth).
local function grow(src, list)
  if src == '' then src = 'other' end
  for t in list:gmatch('[^,]+') do count('g:' .. src .. ':' .. t) end
end
-- sourceof is the consent source recorded for id ('' : none).
local function sourceof(id)
  local v = redis.call('HGET', consentkey(id), id)
  if not v then return '' end
  return v:match('^([^' .. SEP .. ']*)')
end
-- ixloc is an address's index bucket (IXBUCKETS a shard) and field (48
-- more bits of its hash); indexLoc in Go says the same.
local function ixloc(email)
  local h = redis.sha1hex(email)
  return INDEX .. (tonumber(h:sub(1, 3), 16) %% IXBUCKETS), h:sub(4, 15)
end
-- outbox writes an entry of the shard's outbox; dropoutbox drops some.
local function outbox(id, body, due)
  redis.call('HSET', OUTBOX, id, body)
  redis.call('ZADD', DUE, due, id)
end
local function dropoutbox(ids)
  for _, id in ipairs(ids) do
    redis.call('HDEL', OUTBOX, id)
    redis.call('ZREM', DUE, id)
  end
end
-- unpackrec also keeps the status the record was stored with (r.was), so
-- that save knows which status bit to move without reading the record
-- again: every script that saves a record read it first. packrec joins
-- only fields 1 to 7, so r.was is never stored.
local function unpackrec(v)
  local r = {}
  for f in (v .. SEP):gmatch('([^' .. SEP .. ']*)' .. SEP) do r[#r + 1] = f end
  r.was, r.ixmail, r.ixname = r[1], r[5], r[6]
  return r
end
-- searchkeys are the keys a person is found by in the search index
-- (SEARCH, search.go): the address, the whole name, each of its words
-- (between spaces) and their parts between punctuation, lowercased (ASCII: Lua's lower; searchKeys in Go says the same),
-- each once.
local function searchkeys(email, name)
  local out, seen = {}, {}
  local function add(k)
    if k ~= '' and not seen[k] then seen[k] = true; out[#out + 1] = k end
  end
  add(string.lower(email))
  local n = string.lower(name or '')
  add(n)
  for w in n:gmatch('%%S+') do
    add(w)
    for x in w:gmatch('[^%%p]+') do add(x) end
  end
  return out
end
-- searchset adds (on) or removes a person's entries in the shard's
-- search index: members key NUL id, all scored 0, so ZRANGEBYLEX finds
-- them by the beginning of the key.
local function searchset(id, email, name, on)
  for _, k in ipairs(searchkeys(email, name)) do
    if on then redis.call('ZADD', SEARCH, 0, k .. '\0' .. id)
    else redis.call('ZREM', SEARCH, k .. '\0' .. id) end
  end
end
local function packrec(r) return table.concat(r, SEP, 1, 7) end
-- save writes a record and moves its bit between the status bitmaps
-- (statuskey) when its status changed: every status change goes through
-- here, so the bitmaps list the subscribers by status exactly, the active
-- one (ACTIVE) included. r.was is the status stored before (unpackrec);
-- nil for a record built by hand, which must be one that is not stored
-- yet (a new id).
local function save(id, r)
  if r.was ~= r[1] then
    if r.was then redis.call('SETBIT', statuskey(r.was), slot(id), 0) end
    redis.call('SETBIT', statuskey(r[1]), slot(id), 1)
  end
  -- The search index follows the address and the name: every record
  -- written goes through here, so it lists everyone by what they are
  -- now (r.ixmail, r.ixname: what the stored record was indexed by).
  if r.ixmail ~= r[5] or r.ixname ~= r[6] then
    if r.ixmail then searchset(id, r.ixmail, r.ixname, false) end
    searchset(id, r[5], r[6], true)
    r.ixmail, r.ixname = r[5], r[6]
  end
  redis.call('HSET', subkey(id), id, packrec(r))
  r.was = r[1]
end
-- consent records how a subscription came in (src: form, import, api, admin;
-- "" keeps the one recorded) and when it was asked for (base 36 ms).
-- note (optional): the reason and the actor of an admin's addition,
-- joined by SEP.
local function consent(id, src, at, note)
  if src == '' then
    local v = redis.call('HGET', consentkey(id), id)
    if v then src = v:match('^([^' .. SEP .. ']*)') end
  end
  local v = src .. SEP .. at
  if note and note ~= '' then v = v .. SEP .. note end
  redis.call('HSET', consentkey(id), id, v)
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
-- unindex takes id off the address's index entry.
local function unindex(email, id)
  local ix, f = ixloc(email)
  local keep = {}
  for x in (redis.call('HGET', ix, f) or ''):gmatch('[^,]+') do
    if x ~= tostring(id) then keep[#keep + 1] = x end
  end
  if #keep == 0 then redis.call('HDEL', ix, f) else redis.call('HSET', ix, f, table.concat(keep, ',')) end
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
  local b = slot(id)
  if not fresh then
    for t in all:gmatch('[^,]+') do redis.call('SETBIT', TOPIC .. t, b, 0) end
  end
  for t in chosen:gmatch('[^,]+') do redis.call('SETBIT', TOPIC .. t, b, 1) end
  redis.call('SETBIT', KNOWN, b, 1)
end
local function topicsof(id, all)
  local out, b = {}, slot(id)
  for t in all:gmatch('[^,]+') do
    if redis.call('GETBIT', TOPIC .. t, b) == 1 then out[#out + 1] = t end
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
-- find looks an address up in the shard's index. An id of another shard
-- there (a subscriber from before the shards, whose home shard points to
-- it) comes back as away: the script answers {'away', away} before it
-- writes anything, and the store runs it again in that shard (byAddress).
local function find(email)
  local ix, f = ixloc(email)
  local ids = redis.call('HGET', ix, f)
  if ids then
    for id in ids:gmatch('[^,]+') do
      if mine(id) then
        local v = redis.call('HGET', subkey(id), id)
        if v then
          local r = unpackrec(v)
          if r[5] == email then return id, r end
        end
      else
        -- A pointer names the address only by its hash: the shard it
        -- points to checks the address.
        return nil, nil, id
      end
    end
  end
  return nil
end
-- lookup is find for the scripts that only read or change a subscriber:
-- it answers what the script must answer when there is none here (nil
-- when there is one). Away from the address's home shard (HOME), a miss
-- means the pointer that sent it here is stale.
local function lookup(email)
  local id, r, away = find(email)
  if away then return nil, nil, {'away', away} end
  if not id and not HOME then return nil, nil, {'gone'} end
  if not id then return nil, nil, {'notfound'} end
  return id, r, nil
end
`, sfxSeq, Shards, subsPerBucket, sfxSubs, sfxIndex, sfxActive, sfxReconfirm, sfxSupp, sfxSoft,
	sfxTopic, sfxKnown, sfxOnboard, sfxPush, sfxSeen, sfxDevices, sfxPhone,
	sfxChannels, sfxChose, sfxPhoneCode,
	sfxStatus, sfxConsent, sfxMailLog, sfxFeedbackLog, sfxErased,
	sfxOutbox, sfxDue, sfxSeq, sfxSearch,
	int64(dayCounterTTL/time.Second), feedbackLogCap, indexBuckets) + holdLua + personExtrasLua + leftLua

// leftLua records a person who left through a link of an issue's mail
// (keyLeftBy: one bitmap per issue in each shard, by idSlot), so an
// issue's report counts each person once however often they follow it.
//
//	leftby(key, id)  sets id's bit in key (nil: no issue, nothing) and
//	    keeps the key as long as the shared delivery marks
var leftLua = fmt.Sprintf(`
local function leftby(key, id)
  if not key then return end
  redis.call('SETBIT', key, slot(id), 1)
  redis.call('EXPIRE', key, %d)
end
`, int64(sharedSentTTL/time.Second))

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
