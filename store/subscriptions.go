package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/outbox"
)

// subscribeScript adds an address or re-opens its ended subscription, and
// writes the outbox entry of the mail that the change calls for.
//
//	KEYS[1]  the shard's anchor (anchor, visit)
//	KEYS[2]  the mailbox's confirmation cooldown (holdKeys)
//	KEYS[3]  the mailbox's confirmations of the day (holdKeys)
//	KEYS[4]  today's counters (sfxDay)
//	ARGV[1]  email (normalised)
//	ARGV[2]  name, or ""
//	ARGV[3]  time zone, or ""
//	ARGV[4]  now, unix ms base 36
//	ARGV[5]  "1": activate at once (no double opt-in, import)
//	ARGV[6]  outbox id, or "": no outbox entry
//	ARGV[7]  outbox body
//	ARGV[8]  outbox due, unix ms
//	ARGV[9]  "1": only a new address (import); an existing one answers 'exists',
//	         but an import's own write sent again (created at ARGV[4] by an import) 'ok'
//	ARGV[10] confirmation cooldown, seconds; "0": none
//	ARGV[11] confirmations a day at most; "0": no cap
//	ARGV[12] every topic id, comma-separated
//	ARGV[13] the chosen topics, comma-separated
//	ARGV[14] now, unix ms (the onboarding index's score)
//	ARGV[15] ReconfirmWindow, ms
//	ARGV[16] the address's keyed hash (the erased marker, keyErased)
//	ARGV[17] the consent source: form, import, api, admin, or ""
//	ARGV[18] today, YYYY-MM-DD (UTC): a new id's day in the join index (sfxJoinDay)
//	ARGV[19] tags to add, comma-separated, or ""
//	ARGV[20] field values to merge, packed as stored (name SEP value …), or ""
//	ARGV[21] an admin's addition: the reason SEP the actor; or ""
//
// The address is looked up in the shard (find): away, the script answers
// 'away' and the id; a new subscriber is only made in its home shard
// (away from it, a miss answers 'gone'). Both write nothing.
//
// An address not on the list whose hash is in the erased set was erased: an
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
// signup or import, and confirmation when activated (not for an import);
// when activated, each chosen topic's growth by the source (grow).
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
DAY = KEYS[4]
local email = ARGV[1]
local confirm = ARGV[5] ~= '1' and ARGV[6] ~= ''
local id, r, away = find(email)
if away then return {'away', away} end
if not id and not HOME then return {'gone'} end
if not id and ARGV[9] == '1' and ARGV[16] ~= '' and redis.call('SISMEMBER', ERASED, ARGV[16]) == 1 then
  return {'erased'}
end
local suppressed = false
if id then
  if ARGV[9] == '1' then
    -- This import's own write, sent again: go-redis sends a pipeline
    -- again when its read deadline passes, and a command waiting out a
    -- slow Redis (Wait.Resend) does too. A record an import created at
    -- this very request's time (the millisecond the batch was read) is
    -- that write: it answers as the first sending did, and counts nothing
    -- twice. (Two imports of one address within one millisecond would
    -- both count it added; a signup in that millisecond is not an import.)
    if ARGV[17] == 'import' and r[2] == ARGV[4] and sourceof(id) == 'import' then
      return {'ok', id, packrec(r), topicsof(id, ARGV[12]), '0'}
    end
    return {'exists', id, packrec(r), topicsof(id, ARGV[12]), reconfirming(id, r)}
  end
  if r[1] == 'a' then return {'active', id, packrec(r), topicsof(id, ARGV[12]), '0'} end
  suppressed = r[1] == 'b' or r[1] == 'c'
  if suppressed and not confirm then return {'suppressed', id, packrec(r), topicsof(id, ARGV[12]), reconfirming(id, r)} end
  if suppressed and redis.call('EXISTS', RECONF .. id) == 1 then
    return {'held', id, packrec(r), topicsof(id, ARGV[12]), reconfirming(id, r)}
  end
end
if confirm and not takehold(KEYS[2], KEYS[3], ARGV[10], ARGV[11]) then
  if id then return {'held', id, packrec(r), topicsof(id, ARGV[12]), reconfirming(id, r)} end
  return {'held'}
end
if ARGV[6] ~= '' then outbox(ARGV[6], ARGV[7], ARGV[8]) end
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
  id = newid()
  r = {'p', ARGV[4], '', '', email, '', ''}
  index(email, id)
  redis.call('HSETNX', JOINDAY, ARGV[18], slot(id))
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
if ARGV[19] ~= '' then addtags(id, ARGV[19]) end
if ARGV[20] ~= '' then
  local kv = {}
  for f in (ARGV[20] .. SEP):gmatch('([^' .. SEP .. ']*)' .. SEP) do kv[#kv + 1] = f end
  setfields(id, kv)
end
consent(id, ARGV[17], ARGV[4], ARGV[21])
count(ARGV[17] == 'import' and 'import' or 'signup')
if ARGV[5] == '1' then grow(ARGV[17], ARGV[13]) end
if ARGV[5] == '1' and ARGV[9] ~= '1' then
  count('confirm')
  if ARGV[16] ~= '' then redis.call('SREM', ERASED, ARGV[16]) end
end
return {'ok', id, packrec(r), ARGV[13], '0'}
`)

// Subscribe implements Subscribers.
func (r *Redis) Subscribe(ctx context.Context, req SubscribeRequest) (Subscriber, error) {
	args, err := r.subscribeArgs(req, at36(r.now()))
	if err != nil {
		return Subscriber{}, fmt.Errorf("subscribe %s: %w", req.Email, err)
	}
	// The tags are known before anyone has them: should the person's
	// write fail after, a tag known to nobody is harmless, where a person
	// stored with the registry's write failed after would be answered as
	// a failure that had in fact happened.
	if err := r.registerTags(ctx, req.Tags); err != nil {
		return Subscriber{}, fmt.Errorf("subscribe %s: %w", req.Email, err)
	}
	res, _, err := r.byAddress(ctx, subscribeScript, req.Email, r.subscribeKeys(req.Email), args)
	if err != nil {
		return Subscriber{}, fmt.Errorf("subscribe %s: %w", req.Email, err)
	}
	return decodeResult(res)
}

// registerTags adds tags about to be given to someone to the known ones
// (a separate step, before theirs: the registry is in a slot of its own).
func (r *Redis) registerTags(ctx context.Context, tags []string) error {
	if len(tags) == 0 {
		return nil
	}
	if err := r.rdb.SAdd(ctx, keyTags, anySlice(tags)...).Err(); err != nil {
		return fmt.Errorf("register tags: %w", err)
	}
	return nil
}

func (r *Redis) subscribeArgs(req SubscribeRequest, now string) ([]any, error) {
	if err := checkFields(req.Email, req.Name, req.Timezone, req.Reason, req.Actor); err != nil {
		return nil, err
	}
	note := ""
	if req.Reason != "" {
		note = req.Reason + recordSep + req.Actor
	}
	chosen := r.tl().defaults
	if req.Topics != nil {
		chosen = strings.Join(req.Topics, ",")
	}
	if err := checkTags(req.Tags); err != nil {
		return nil, err
	}
	var fields []string
	for _, name := range slices.Sorted(maps.Keys(req.Fields)) {
		if !fieldName.MatchString(name) || checkText(req.Fields[name]) != nil {
			return nil, fmt.Errorf("%w %s: not a field name and a line of text", ErrBadField, name)
		}
		fields = append(fields, name, req.Fields[name])
	}
	return []any{req.Email, req.Name, req.Timezone, now, boolArg(req.Activate),
		req.Outbox.ID, req.Outbox.Body, ms(req.Outbox.Due), boolArg(req.OnlyNew),
		holdSeconds(req.Hold), req.Hold.PerDay, r.tl().all, chosen, ms(r.now()), ReconfirmWindow.Milliseconds(),
		r.erasure(req.Email), string(req.Source), r.now().UTC().Format(time.DateOnly),
		strings.Join(req.Tags, ","), strings.Join(fields, recordSep), note}, nil
}

// subscribeKeys are the KEYS of subscribeScript for email in a shard.
func (r *Redis) subscribeKeys(email string) func(a string, s shard) []string {
	return func(a string, s shard) []string {
		cool, day := holdKeys(s, HoldConfirm, email)
		return []string{a, cool, day, r.dayKey(s)}
	}
}

// confirmScript activates a pending subscription, or a suppressed one
// whose confirmation was asked for (prefixReconfirm: its name, time zone
// and topics apply now, and it leaves the suppression list), and writes
// the welcome's outbox entry.
//
//	KEYS[1]  the shard's anchor (anchor, visit)
//	KEYS[2]  today's counters (sfxDay)
//	ARGV[1]  email
//	ARGV[2]  now, unix ms base 36
//	ARGV[3]  welcome outbox id
//	ARGV[4]  welcome outbox body
//	ARGV[5]  welcome due, unix ms
//	ARGV[6]  every topic id, comma-separated
//	ARGV[7]  now, unix ms (the onboarding index's score)
//	ARGV[8]  the address's keyed hash (the erased marker), or ""
//
// Writes status a, confirmed, the active bit and the onboarding index,
// counts the day's confirmation and each of the person's topics' growth
// by the consent's source (grow), takes the address off the erased set (the
// person's own confirmation brings them back after an erasure);
// for a suppressed one also name, time zone, topics, ended cleared, off
// the suppression lists, the reconfirmation key deleted. Answers 'ok',
// 'active' (already), 'notpending' or 'notfound', then the id, the record
// and the topics.
var confirmScript = subscriberScript(`
DAY = KEYS[2]
local id, r, miss = lookup(ARGV[1])
if miss then return miss end
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
grow(sourceof(id), topicsof(id, ARGV[6]))
if ARGV[8] ~= '' then redis.call('SREM', ERASED, ARGV[8]) end
if ARGV[3] ~= '' then
  outbox(ARGV[3], ARGV[4], ARGV[5])
  redis.call('ZADD', ONBOARD, ARGV[7], id)
end
return {'ok', id, packrec(r), topicsof(id, ARGV[6])}
`)

// Confirm implements Subscribers.
func (r *Redis) Confirm(ctx context.Context, email string, welcome outbox.Entry) (Subscriber, error) {
	res, _, err := r.byAddress(ctx, confirmScript, email, r.withDay,
		[]any{email, at36(r.now()), welcome.ID, welcome.Body, ms(welcome.Due), r.tl().all, ms(r.now()), r.erasure(email)})
	if err != nil {
		return Subscriber{}, fmt.Errorf("confirm %s: %w", email, err)
	}
	return decodeResult(res)
}

// Unsubscribe implements Subscribers.
func (r *Redis) Unsubscribe(ctx context.Context, email string, cancel ...string) (Subscriber, error) {
	return r.end(ctx, email, Unsubscribed, cancel, 0)
}

// UnsubscribeFrom implements Subscribers.
func (r *Redis) UnsubscribeFrom(ctx context.Context, email string, issue int64, cancel ...string) (Subscriber, error) {
	return r.end(ctx, email, Unsubscribed, cancel, issue)
}

// MarkBounced implements Subscribers.
func (r *Redis) MarkBounced(ctx context.Context, email string) error {
	_, err := r.end(ctx, email, Bounced, nil, 0)
	return err
}

// endScript moves a subscription to unsubscribed or bounced and drops the
// outbox entries of mails that must no longer go. Bounced wins over
// unsubscribed: an address that bounced must not be mailed even if the
// person later asks to leave. Complained wins over both.
//
//	KEYS[1]  the shard's anchor (anchor, visit)
//	KEYS[2]  today's counters (sfxDay)
//	KEYS[3]  optional: the issue whose link the person left through (sfxLeftBy)
//	ARGV[1]  email
//	ARGV[2]  now, unix ms base 36
//	ARGV[3]  the new status: 'u' or 'b'
//	ARGV[4]  every topic id, comma-separated
//	ARGV[5…] outbox ids to drop
//
// Counts the day's unsubscribe or bounce when the status changes, and an
// unsubscribe through an issue's link in that issue's bitmap. Writes
// the status, ended, the suppression list (bounced), and clears the
// active bit and the topics; a confirmation asked for a suppressed address
// is cancelled (cancelreconfirm); leaving ('u') also deletes the browsers
// for web push (a bounce keeps them unused: it was no choice of the
// person). Answers 'ok' or 'notfound', then the id, the record, the (no)
// topics, an empty field (not reconfirming), and '1' when this call changed the status
// ('0' when it was already ended so): the caller tells news from a link
// used again by that, not by the time.
var endScript = subscriberScript(`
DAY = KEYS[2]
local id, r, miss = lookup(ARGV[1])
if miss then return miss end
cancelreconfirm(id)
local changed = '0'
if r[1] ~= 'c' and (ARGV[3] == 'b' or (r[1] ~= 'u' and r[1] ~= 'b')) then
  if r[1] ~= ARGV[3] then
    count(ARGV[3] == 'b' and 'bounce' or 'unsubscribe')
    changed = '1'
    if ARGV[3] == 'u' then leftby(KEYS[3], id) end
  end
  r[1], r[4] = ARGV[3], ARGV[2]
  save(id, r)
  if ARGV[3] == 'b' then redis.call('ZADD', SUPP .. 'b', id, id) end
end
redis.call('SETBIT', ACTIVE, slot(id), 0)
settopics(id, ARGV[4], '')
if ARGV[3] == 'u' then
  redis.call('DEL', PUSH .. id, DEVICES .. id, PHONE .. id, CHANNELS .. id, PHONECODE .. id)
  redis.call('SETBIT', CHOSE, slot(id), 0)
end
dropoutbox({unpack(ARGV, 5)})
return {'ok', id, packrec(r), '', '', changed}
`)

func (r *Redis) end(ctx context.Context, email string, to Status, cancel []string, issue int64) (Subscriber, error) {
	args := []any{email, at36(r.now()), codeByStatus[to], r.tl().all}
	for _, id := range cancel {
		args = append(args, id)
	}
	res, _, err := r.byAddress(ctx, endScript, email, r.withDayLeftBy(issue), args)
	if err != nil {
		return Subscriber{}, fmt.Errorf("mark %s %s: %w", email, to, err)
	}
	return decodeResult(res)
}

// getScript looks a subscriber up by address.
//
//	KEYS[1]  the shard's anchor (anchor, visit)
//	ARGV[1]  email
//	ARGV[2]  every topic id, comma-separated
//
// Answers 'ok', the id, the record, the topics, whether it is
// reconfirming, an empty field (ended, for the scripts that end), the
// tags and the packed field values; or 'notfound'.
var getScript = subscriberScript(`
local id, r, miss = lookup(ARGV[1])
if miss then return miss end
return {'ok', id, packrec(r), topicsof(id, ARGV[2]), reconfirming(id, r), '', tagsof(id), redis.call('HGET', fieldkey(id), id) or ''}
`)

// Get implements Subscribers.
func (r *Redis) Get(ctx context.Context, email string) (Subscriber, error) {
	res, _, err := r.byAddress(ctx, getScript, email, anchorOnly, []any{email, r.tl().all})
	if err != nil {
		return Subscriber{}, fmt.Errorf("load subscriber %s: %w", email, err)
	}
	return decodeResult(res)
}

// getByIDScript looks a subscriber up by id, answering as getScript
// does.
//
//	KEYS[1]  the id's shard's anchor
//	ARGV[1]  id
//	ARGV[2]  every topic id, comma-separated
//
// Answers 'ok', the id, the record, the topics, whether a confirmation
// of a suppressed address waits, an empty field, the tags and the packed
// field values; or 'notfound'.
var getByIDScript = subscriberScript(`
local id = ARGV[1]
local v = redis.call('HGET', subkey(id), id)
if not v then return {'notfound'} end
return {'ok', id, v, topicsof(id, ARGV[2]), reconfirming(id, unpackrec(v)), '', tagsof(id), redis.call('HGET', fieldkey(id), id) or ''}
`)

// GetByID implements Subscribers.
func (r *Redis) GetByID(ctx context.Context, id int64) (Subscriber, error) {
	if id <= 0 {
		return Subscriber{}, ErrNotFound
	}
	res, err := getByIDScript.Run(ctx, r.rdb, []string{anchor(idShard(id))}, id, r.tl().all).StringSlice()
	if err != nil {
		return Subscriber{}, fmt.Errorf("load subscriber %d: %w", id, err)
	}
	return decodeResult(res)
}

// SetPreferences implements Subscribers.
func (r *Redis) SetPreferences(ctx context.Context, email string, p Preferences, cancel outbox.Cancel) (Subscriber, error) {
	if err := checkFields(p.Name, p.Timezone); err != nil {
		return Subscriber{}, fmt.Errorf("preferences of %s: %w", email, err)
	}
	return r.changeTopics(ctx, email, "set", strings.Join(p.Topics, ","), p.Name, p.Timezone, cancel, p.FromIssue)
}

// LeaveTopic implements Subscribers.
func (r *Redis) LeaveTopic(ctx context.Context, email, topic string, cancel outbox.Cancel) (Subscriber, error) {
	return r.changeTopics(ctx, email, "leave", topic, "", "", cancel, 0)
}

// LeaveTopicFrom implements Subscribers.
func (r *Redis) LeaveTopicFrom(ctx context.Context, email, topic string, issue int64, cancel outbox.Cancel) (Subscriber, error) {
	return r.changeTopics(ctx, email, "leave", topic, "", "", cancel, issue)
}

// topicsScript changes an active subscriber's topics: replaces them, or
// turns one off. No topic left ends the subscription, as endScript does
// for 'u'; leaving the sequence's topic drops its outbox entries.
//
//	KEYS[1]  the shard's anchor (anchor, visit)
//	KEYS[2]  today's counters (sfxDay)
//	KEYS[3]  optional: the issue whose link the change came through (sfxLeftBy)
//	ARGV[1]  email
//	ARGV[2]  now, unix ms base 36
//	ARGV[3]  every topic id, comma-separated
//	ARGV[4]  'set': ARGV[5] is the new choice; 'leave': ARGV[5] is the topic to turn off
//	ARGV[5]  topics, comma-separated
//	ARGV[6]  the sequence's topic
//	ARGV[7]  'set': the name
//	ARGV[8]  'set': the time zone
//	ARGV[9…] the sequence's outbox ids
//
// Writes the topics, with 'set' the name and time zone, and, with no topic
// left, status u, ended, the active bit and the browsers for web push.
// With KEYS[3], the person's bit there when they left through the
// issue's link: 'leave' of a topic they had on, or no topic left.
// Answers 'ok', 'notactive' or 'notfound', then the id, the record and the
// topics.
var topicsScript = subscriberScript(`
DAY = KEYS[2]
local id, r, miss = lookup(ARGV[1])
if miss then return miss end
if r[1] ~= 'a' then return {'notactive', id, packrec(r), topicsof(id, ARGV[3])} end
local chosen = ARGV[5]
local left = false
if ARGV[4] == 'leave' then
  local keep = {}
  for t in topicsof(id, ARGV[3]):gmatch('[^,]+') do
    if t ~= ARGV[5] then keep[#keep + 1] = t else left = true end
  end
  chosen = table.concat(keep, ',')
end
settopics(id, ARGV[3], chosen)
if ARGV[4] == 'set' then r[6], r[7] = ARGV[7], ARGV[8] end
if chosen == '' then
  left = true
  r[1], r[4] = 'u', ARGV[2]
  count('unsubscribe')
  redis.call('DEL', PUSH .. id, DEVICES .. id, PHONE .. id, CHANNELS .. id, PHONECODE .. id)
  redis.call('SETBIT', CHOSE, slot(id), 0)
end
save(id, r)
if left then leftby(KEYS[3], id) end
if not (',' .. chosen .. ','):find(',' .. ARGV[6] .. ',', 1, true) then
  dropoutbox({unpack(ARGV, 9)})
end
return {'ok', id, packrec(r), chosen}
`)

func (r *Redis) changeTopics(ctx context.Context, email, mode, list, name, tz string, cancel outbox.Cancel, issue int64) (Subscriber, error) {
	args := []any{email, at36(r.now()), r.tl().all, mode, list, cancel.Topic, name, tz}
	for _, id := range cancel.Outbox {
		args = append(args, id)
	}
	res, _, err := r.byAddress(ctx, topicsScript, email, r.withDayLeftBy(issue), args)
	if err != nil {
		return Subscriber{}, fmt.Errorf("change the topics of %s: %w", email, err)
	}
	sub, err := decodeResult(res)
	// The script changes active subscribers only (ErrNotActive
	// otherwise): one it answers unsubscribed left in this call.
	sub.Ended = err == nil && sub.Status == Unsubscribed
	return sub, err
}

// SubscribeMany runs Subscribe for many requests in one pipeline (bulk
// import). The errors line up with reqs.
func (r *Redis) SubscribeMany(ctx context.Context, reqs []SubscribeRequest) ([]error, error) {
	now := at36(r.now())
	errs := make([]error, len(reqs))
	var args [][]any
	var at []int // args[j] is reqs[at[j]]
	// An address twice in one call: the script would take its second
	// request for its own first write sent again (see subscribeScript), so
	// the second answers after the first, here.
	first := make(map[string]int, len(reqs))
	var again [][2]int // {i, the index of its first request}
	for i, req := range reqs {
		if f, seen := first[req.Email]; seen && req.OnlyNew {
			again = append(again, [2]int{i, f})
			continue
		}
		first[req.Email] = i
		a, err := r.subscribeArgs(req, now)
		if err != nil {
			errs[i] = err
			continue
		}
		args, at = append(args, a), append(at, i)
	}
	if len(args) == 0 {
		return errs, nil
	}
	// Known before anyone has them (see Subscribe).
	var tags []string
	for _, i := range at {
		tags = append(tags, reqs[i].Tags...)
	}
	slices.Sort(tags)
	if err := r.registerTags(ctx, slices.Compact(tags)); err != nil {
		return nil, err
	}
	cmds, err := runPipelined(ctx, r.rdb, subscribeScript, func(j int) []string {
		email := reqs[at[j]].Email
		home := homeShard(email)
		return r.subscribeKeys(email)(anchor(home), home)
	}, args)
	if err != nil {
		return nil, fmt.Errorf("subscribe %d addresses: %w", len(reqs), err)
	}
	for j, c := range cmds {
		i := at[j]
		res, err := c.StringSlice()
		if err == nil && len(res) == 2 && res[0] == "away" {
			// A subscriber from before the shards: its own shard
			// answers, one call.
			res, _, err = r.byAddress(ctx, subscribeScript, reqs[i].Email, r.subscribeKeys(reqs[i].Email), args[j])
		}
		if err == nil {
			_, err = decodeResult(res)
		}
		errs[i] = err
	}
	for _, d := range again {
		if errs[d[1]] == nil {
			errs[d[0]] = ErrExists
		} else {
			errs[d[0]] = errs[d[1]]
		}
	}
	return errs, nil
}
