package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/topics"
)

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

// AddItem implements Digests.
func (r *Redis) AddItem(ctx context.Context, it Item) (Item, error) {
	it.PublishedAt = r.now().UTC().Truncate(time.Millisecond)
	if it.Topic == "" {
		it.Topic = topics.Digest
	}
	id, err := addItemScript.Run(ctx, r.rdb, []string{keyItemSeq, itemsKey(it.Topic)},
		prefixItem, it.Title, it.URL, it.Summary, ms(it.PublishedAt), it.Topic).Int64()
	if err != nil {
		return Item{}, fmt.Errorf("add item: %w", err)
	}
	it.ID = id
	return it, nil
}

// itemsKey is the zset of topic's item ids. The digest's is the one it
// always was, so items stored before topics had items are the digest's.
func itemsKey(topic string) string {
	if topic == topics.Digest || topic == "" {
		return keyItems
	}
	return prefixItems + topic
}

// ItemsAfter implements Digests.
func (r *Redis) ItemsAfter(ctx context.Context, topic string, after int64, limit int) ([]Item, error) {
	ids, err := r.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: itemsKey(topic), ByScore: true,
		Start: "(" + strconv.FormatInt(after, 10), Stop: "+inf", Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("items of %s: %w", topic, err)
	}
	if len(ids) == 0 {
		return []Item{}, nil
	}
	return r.items(ctx, ids)
}

// Item implements Digests.
func (r *Redis) Item(ctx context.Context, id int64) (Item, error) {
	list, err := r.items(ctx, []string{strconv.FormatInt(id, 10)})
	if err != nil {
		return Item{}, err
	}
	if len(list) == 0 {
		return Item{}, ErrNoItem
	}
	return list[0], nil
}

// updateItemScript replaces an item's text.
//
//	KEYS[1]  the item's hash
//	ARGV[1]  title   ARGV[2]  url   ARGV[3]  summary
//
// Answers 1, or 0 when there is no such item (nothing written).
var updateItemScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 't', ARGV[1], 'u', ARGV[2], 's', ARGV[3])
return 1
`)

// UpdateItem implements Digests.
func (r *Redis) UpdateItem(ctx context.Context, it Item) (Item, error) {
	key := prefixItem + strconv.FormatInt(it.ID, 10)
	n, err := updateItemScript.Run(ctx, r.rdb, []string{key}, it.Title, it.URL, it.Summary).Int()
	if err != nil {
		return Item{}, fmt.Errorf("update item %d: %w", it.ID, err)
	}
	if n == 0 {
		return Item{}, ErrNoItem
	}
	return r.Item(ctx, it.ID)
}

// deleteItemScript removes an item.
//
//	KEYS[1]  the item's hash   KEYS[2]  its topic's zset of item ids
//	ARGV[1]  id
//
// Deletes the hash and the id from the zset (an item's topic never
// changes, so the zset the caller read it from is still its own).
// Answers 1, or 0 when there is no such item.
var deleteItemScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[1])
return 1
`)

// DeleteItem implements Digests.
func (r *Redis) DeleteItem(ctx context.Context, id int64) error {
	it, err := r.Item(ctx, id)
	if err != nil {
		return err
	}
	n, err := deleteItemScript.Run(ctx, r.rdb, []string{prefixItem + strconv.FormatInt(id, 10), itemsKey(it.Topic)}, id).Int()
	if err != nil {
		return fmt.Errorf("delete item %d: %w", id, err)
	}
	if n == 0 {
		return ErrNoItem
	}
	return nil
}

// startRunScript creates a period's digest run once, fixing its items
// (those after the last item any run took) and its audience.
//
//	KEYS[1]  prefixRun .. period   the run hash
//	KEYS[2]  keyLastItem           highest item id any run took
//	KEYS[3]  keyItems
//	KEYS[4]  keyLatestRun          period of the latest run
//	ARGV[1]  now, unix ms
//	ARGV[2]  period
//	ARGV[3]  the audience: the digest topic's active subscribers, counted
//	         over the shards just before (audience)
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
redis.call('HSET', KEYS[1], 'items', table.concat(ids, ','), 'created', ARGV[1],
  'audience', ARGV[3], 'cursor', 0, 'planned', 0, 'state', state, 'as_issue', 1)
redis.call('SET', KEYS[4], ARGV[2])
return 1
`)

// StartDigestRun implements Digests.
func (r *Redis) StartDigestRun(ctx context.Context, period string) (DigestRun, bool, error) {
	audience, err := r.audience(ctx, []string{topics.Digest})
	if err != nil {
		return DigestRun{}, false, fmt.Errorf("start digest %s: count its audience: %w", period, err)
	}
	n, err := startRunScript.Run(ctx, r.rdb, []string{prefixRun + period, keyLastItem, keyItems, keyLatestRun},
		ms(r.now()), period, audience).Int()
	if err != nil {
		return DigestRun{}, false, fmt.Errorf("start digest %s: %w", period, err)
	}
	run, err := r.DigestRun(ctx, period)
	return run, n == 1, err
}

// DigestRun implements Digests.
func (r *Redis) DigestRun(ctx context.Context, period string) (DigestRun, error) {
	f, err := r.rdb.HGetAll(ctx, prefixRun+period).Result()
	if err != nil {
		return DigestRun{}, fmt.Errorf("load digest %s: %w", period, err)
	}
	if len(f) == 0 {
		return DigestRun{}, ErrNoRun
	}
	run := DigestRun{
		Period: period, State: f["state"], CreatedAt: msTime(f["created"]), PlannedAt: msTime(f["planned_at"]),
		Items: []Item{},
	}
	n, err := r.bitCounts(ctx, sfxSent+DigestMarkKind+":"+period, outcomeKey(period, OutcomeSkipped), outcomeKey(period, OutcomeFailed))
	if err != nil {
		return DigestRun{}, fmt.Errorf("load digest %s: %w", period, err)
	}
	run.Sent, run.Skipped, run.Failed = n[0], n[1], n[2]
	run.Audience, _ = strconv.ParseInt(f["audience"], 10, 64)
	run.Cursor, _ = strconv.ParseInt(f["cursor"], 10, 64)
	run.Planned, _ = strconv.ParseInt(f["planned"], 10, 64)
	run.Bounces, _ = strconv.ParseInt(f["bounces"], 10, 64)
	run.Complaints, _ = strconv.ParseInt(f["complaints"], 10, 64)
	run.AsIssue = f["as_issue"] == "1"
	run.Issue, _ = strconv.ParseInt(f["issue"], 10, 64)
	if run.Issue > 0 {
		prog, err := r.IssueProgress(ctx, run.Issue)
		if err != nil {
			return DigestRun{}, fmt.Errorf("load digest %s: %w", period, err)
		}
		run = run.WithIssue(prog)
	}
	run = run.WithRates()
	if f["items"] != "" {
		if run.Items, err = r.items(ctx, strings.Split(f["items"], ",")); err != nil {
			return DigestRun{}, err
		}
	}
	return run, nil
}

// DigestItems implements Digests: the run's item list and the items, two
// round trips, whatever the list's size.
func (r *Redis) DigestItems(ctx context.Context, period string) ([]Item, error) {
	f, err := r.rdb.HMGet(ctx, prefixRun+period, "items", "created").Result()
	if err != nil {
		return nil, fmt.Errorf("load digest %s: %w", period, err)
	}
	if f[1] == nil {
		return nil, ErrNoRun // every run has its creation time
	}
	ids, _ := f[0].(string)
	if ids == "" {
		return []Item{}, nil
	}
	return r.items(ctx, strings.Split(ids, ","))
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
		topic := f["tp"]
		if topic == "" {
			topic = topics.Digest // stored before items had topics
		}
		out = append(out, Item{ID: id, Title: f["t"], URL: f["u"], Summary: f["s"], Topic: topic, PublishedAt: msTime(f["p"])})
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

// AdvanceDigestRun implements Digests.
func (r *Redis) AdvanceDigestRun(ctx context.Context, period string, cursor int64, n int, done bool) error {
	state := ""
	if done {
		state = RunPlanned
	}
	err := advanceRunScript.Run(ctx, r.rdb, []string{prefixRun + period}, cursor, n, state, ms(r.now())).Err()
	return wrapErr("advance digest "+period, err)
}

// AudienceAfter implements Digests: the shards' active and topic
// bitmaps walked side by side (walkIDs). Nothing is written: the walk
// costs Redis no memory.
func (r *Redis) AudienceAfter(ctx context.Context, topic string, cursor int64, limit int) ([]int64, error) {
	terms := [][]string{{sfxActive}}
	if topic != "" {
		terms = append(terms, []string{sfxTopic + topic})
	}
	ids, err := r.walkIDs(ctx, terms, cursor, limit)
	if err != nil {
		return nil, fmt.Errorf("audience of %q after %d: %w", topic, cursor, err)
	}
	return ids, nil
}

// AudienceByShard implements Issues: the shards' active and topic
// bitmaps walked one shard after the other (walkShards).
func (r *Redis) AudienceByShard(ctx context.Context, topicIDs []string, after int64, limit int) ([]int64, error) {
	if len(topicIDs) == 0 {
		return nil, nil
	}
	terms := [][]string{{sfxActive}}
	if !slices.Contains(topicIDs, "") {
		anyOf := make([]string, len(topicIDs))
		for i, tp := range topicIDs {
			anyOf[i] = sfxTopic + tp
		}
		terms = append(terms, anyOf)
	}
	ids, err := r.walkShards(ctx, terms, after, limit)
	if err != nil {
		return nil, fmt.Errorf("audience of %q after walk key %d: %w", topicIDs, after, err)
	}
	return ids, nil
}

// SubscribersByID implements Digests: one HMGET per record bucket of the
// ids, and each topic's bitmap over the stretch of each shard the ids
// cover (a batch's ids are close together), all in one pipeline.
func (r *Redis) SubscribersByID(ctx context.Context, ids []int64) ([]Subscriber, error) {
	tl := r.tl() // one list throughout, though the console changes it meanwhile
	if len(ids) == 0 {
		return nil, nil
	}
	type bucket struct {
		fields []string
		at     []int
	}
	type stretch struct{ lo, hi int64 } // bytes of the shard's bitmaps
	var order []string
	buckets := map[string]*bucket{}
	stretches := map[shard]*stretch{}
	for i, id := range ids {
		if id <= 0 {
			continue // no such subscriber: ID 0
		}
		s := idShard(id)
		key := s.key(sfxSubs + strconv.FormatInt(idSlot(id)/subsPerBucket, 10))
		b, ok := buckets[key]
		if !ok {
			b = &bucket{}
			buckets[key] = b
			order = append(order, key)
		}
		b.fields = append(b.fields, strconv.FormatInt(id, 10))
		b.at = append(b.at, i)
		at := idSlot(id) / 8
		if st, ok := stretches[s]; !ok {
			stretches[s] = &stretch{at, at}
		} else {
			st.lo, st.hi = min(st.lo, at), max(st.hi, at)
		}
	}
	cmds := make([]*redis.SliceCmd, len(order))
	tags := make([]*redis.SliceCmd, len(order))
	fields := make([]*redis.SliceCmd, len(order))
	tps := map[shard][]*redis.StringCmd{}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, key := range order {
			b := buckets[key]
			cmds[j] = p.HMGet(ctx, key, b.fields...)
			// The tags and field values are packed as the records are:
			// the same bucket of their own hashes.
			id := ids[b.at[0]]
			tags[j] = p.HMGet(ctx, bucketKey(sfxTagList, id), b.fields...)
			fields[j] = p.HMGet(ctx, bucketKey(sfxFieldValues, id), b.fields...)
		}
		for s, st := range stretches {
			for _, t := range tl.ids {
				tps[s] = append(tps[s], p.GetRange(ctx, s.key(sfxTopic+t), st.lo, st.hi))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load %d subscribers: %w", len(ids), err)
	}
	out := make([]Subscriber, len(ids))
	for j, key := range order {
		b := buckets[key]
		for k, v := range cmds[j].Val() {
			rec, ok := v.(string)
			if !ok {
				continue // no such subscriber: ID 0
			}
			sub, err := decodeRecord(b.fields[k], rec)
			if err != nil {
				return nil, err
			}
			if v, ok := tags[j].Val()[k].(string); ok {
				sub.Tags = splitList(v)
			}
			if v, ok := fields[j].Val()[k].(string); ok {
				sub.Fields = unpackFields(v)
			}
			s := idShard(sub.ID)
			sub.Topics = []string{}
			for t, c := range tps[s] {
				if bitAt(c.Val(), idSlot(sub.ID)-stretches[s].lo*8) {
					sub.Topics = append(sub.Topics, tl.ids[t])
				}
			}
			out[b.at[k]] = sub
		}
	}
	return out, nil
}

// claimScript claims delivery marks (see markKeys), all of a batch in one
// call. A shared mark's claim is a field of one hash per kind and key
// whose value is its expiry and owner: a key with its own expiry per
// recipient cost Redis more than all else a digest mail needs of it.
//
//	KEYS[2i-1]  mark i's sent mark: a bitmap by idSlot for shared marks, a string otherwise
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
var claimScript = redis.NewScript(claimLua + fmt.Sprintf(`
local NSH = %d
local out, hashes = {}, {}
for i = 1, #KEYS / 2 do
  local sent, claim, id = KEYS[2*i-1], KEYS[2*i], ARGV[2*i+3]
  local code
  if ARGV[2*i+2] == '1' then
    if redis.call('GETBIT', sent, math.floor(tonumber(id) / NSH)) == 1 then
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
`, Shards))

// claimSharedScript is claimScript for a batch of shared marks of one kind
// and key (a digest batch): three calls for the whole batch instead of
// three per mark. It reads the batch's stretch of the sent bitmap at once
// (ids of a batch are close together; far apart, it asks bit by bit). The
// ids must be distinct.
//
//	KEYS[1]  the sent bitmap (of one shard: the ids are all of it)
//	KEYS[2]  the claims hash
//	ARGV[1]  now, unix ms
//	ARGV[2]  claim ttl, ms
//	ARGV[3]  owner (the asynq task ID; "" for none)
//	ARGV[4…] subscriber ids
//
// Writes the claims it takes and gives the claims hash an expiry of twice
// the ttl. Answers one code per id, as claimScript.
var claimSharedScript = redis.NewScript(claimLua + fmt.Sprintf(`
local NSH = %d
local n = #ARGV - 3
local ids, lo, hi = {}, math.huge, -1
for i = 1, n do
  -- the id's bit: its slot in the shard's bitmap
  local id = math.floor(tonumber(ARGV[i + 3]) / NSH)
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
    sent = b ~= nil and math.floor(b / weight[id %% 8 + 1]) %% 2 == 1
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
`, Shards))

// ClaimMarks implements Marks: one script call for each shard's marks,
// all in one pipeline. Each call is atomic; an error leaves the claims of
// the shards that answered taken, which the same owner takes over on its
// retry (claimLua) and which expire with ttl otherwise.
func (r *Redis) ClaimMarks(ctx context.Context, owner string, marks []Mark, ttl time.Duration) ([]Claim, error) {
	if len(marks) == 0 {
		return nil, nil
	}
	groups := byShard(marks)
	scripts := make([]*redis.Script, len(groups))
	keys := make([][]string, len(groups))
	args := make([][]any, len(groups))
	for g, at := range groups {
		ms := make([]Mark, len(at))
		for i, j := range at {
			ms[i] = marks[j]
		}
		a := []any{r.now().UnixMilli(), ttl.Milliseconds(), owner}
		if sent, claims, ok := oneSharedKey(ms); ok {
			scripts[g], keys[g] = claimSharedScript, []string{sent, claims}
			for _, m := range ms {
				a = append(a, m.SubscriberID)
			}
		} else {
			scripts[g] = claimScript
			for _, m := range ms {
				sent, claim := markKeys(m)
				keys[g] = append(keys[g], sent, claim)
				a = append(a, boolArg(m.Shared), m.SubscriberID)
			}
		}
		args[g] = a
	}
	out := make([]Claim, len(marks))
	for _, script := range []*redis.Script{claimSharedScript, claimScript} {
		var idx []int
		for g := range groups {
			if scripts[g] == script {
				idx = append(idx, g)
			}
		}
		if len(idx) == 0 {
			continue
		}
		sub := make([][]any, len(idx))
		for i, g := range idx {
			sub[i] = args[g]
		}
		cmds, err := runPipelined(ctx, r.rdb, script, func(i int) []string { return keys[idx[i]] }, sub)
		if err != nil {
			return nil, fmt.Errorf("claim %d marks: %w", len(marks), err)
		}
		for i, c := range cmds {
			codes, err := c.Int64Slice()
			at := groups[idx[i]]
			if err == nil && len(codes) != len(at) {
				err = fmt.Errorf("%d answers", len(codes))
			}
			if err != nil {
				return nil, fmt.Errorf("claim %d marks: %w", len(marks), err)
			}
			for k, j := range at {
				out[j] = Claim(codes[k])
			}
		}
	}
	return out, nil
}

// byShard groups the marks' positions by their subscriber's shard, in
// the order the shards first appear.
func byShard(marks []Mark) [][]int {
	var out [][]int
	at := map[shard]int{}
	for i, m := range marks {
		s := idShard(m.SubscriberID)
		g, ok := at[s]
		if !ok {
			g = len(out)
			at[s] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], i)
	}
	return out
}

// oneSharedKey tells whether marks are shared marks of one kind and key
// for distinct subscribers (a digest batch), and their keys.
func oneSharedKey(marks []Mark) (sent, claims string, ok bool) {
	seen := make(map[int64]bool, len(marks))
	for _, m := range marks {
		if !m.Shared || m.Kind != marks[0].Kind || m.Key != marks[0].Key || seen[m.SubscriberID] {
			return "", "", false
		}
		seen[m.SubscriberID] = true
	}
	sent, claims = markKeys(marks[0])
	return sent, claims, true
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
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range marks {
			_, claim := markKeys(m)
			if m.Shared {
				p.HDel(ctx, claim, strconv.FormatInt(m.SubscriberID, 10))
			} else {
				p.Del(ctx, claim)
			}
		}
		return nil
	})
	return wrapErr("release marks", err)
}

// outcomeKey is the suffix of the shards' bitmaps of the readers of key
// (a period, IssueOutcomeKey) with an outcome.
func outcomeKey(key, outcome string) string { return sfxOutcome + key + ":" + outcome }

// SetOutcome implements Digests.
func (r *Redis) SetOutcome(ctx context.Context, period, outcome string, ids ...int64) error {
	if outcome != OutcomeSkipped && outcome != OutcomeFailed {
		return errors.New("unknown outcome " + outcome)
	}
	sfx := outcomeKey(period, outcome)
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		touched := map[shard]bool{}
		for _, id := range ids {
			s := idShard(id)
			p.SetBit(ctx, s.key(sfx), idSlot(id), 1)
			touched[s] = true
		}
		for s := range touched {
			p.Expire(ctx, s.key(sfx), sharedSentTTL)
		}
		return nil
	})
	return wrapErr("record "+outcome, err)
}

// bitAt reads bit i of a stretch of a Redis bitmap (bit 0 is the high bit
// of the first byte); past its end, bits are 0.
func bitAt(bytes string, i int64) bool {
	if i < 0 || i/8 >= int64(len(bytes)) {
		return false
	}
	return bytes[i/8]&(0x80>>(i%8)) != 0
}
