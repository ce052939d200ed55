package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// MarkSent implements Marks: one pipeline for all the marks. Each mark's
// sent bit is set before its claim is dropped (every SETBIT comes before
// the HDELs), so a mark is never seen neither sent nor claimed; no
// transaction is needed for that, and none is paid for.
//
// The same pipeline keeps what PersonalData reads back: each shared
// mark's kind and key in keySentKeys (one entry per key, not per mark),
// and each other mark in its subscriber's mail log (prefixMailLog).
func (r *Redis) MarkSent(ctx context.Context, marks ...Mark) error {
	if len(marks) == 0 {
		return nil
	}
	// A shared mark's claim is a field of its key's claims hash: the
	// fields of one hash go in one HDEL, not one command each.
	done := map[string][]string{}
	var hashes []string // in order, so the pipeline is the same each time
	now := r.now()
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range marks {
			sent, claim := markKeys(m)
			if !m.Shared {
				p.Set(ctx, sent, "1", sentTTL)
				p.Del(ctx, claim)
				log := perPersonKey(sfxMailLog, m.SubscriberID)
				p.ZAdd(ctx, log, redis.Z{Score: float64(now.UnixMilli()), Member: m.Kind + ":" + m.Key})
				p.ZRemRangeByRank(ctx, log, 0, -mailLogCap-1)
				p.Expire(ctx, log, sentTTL)
				continue
			}
			p.SetBit(ctx, sent, idSlot(m.SubscriberID), 1)
			if _, seen := done[claim]; !seen {
				hashes = append(hashes, claim)
				score := float64(sentKeyForever)
				if m.Key != "" {
					p.Expire(ctx, sent, sharedSentTTL)
					score = float64(now.UnixMilli())
				}
				p.ZAdd(ctx, idShard(m.SubscriberID).key(sfxSentKeys), redis.Z{Score: score, Member: m.Kind + ":" + m.Key})
			}
			done[claim] = append(done[claim], strconv.FormatInt(m.SubscriberID, 10))
		}
		for _, claim := range hashes {
			p.HDel(ctx, claim, done[claim]...)
		}
		return nil
	})
	return wrapErr(fmt.Sprintf("mark %d deliveries sent", len(marks)), err)
}

// SentMarks implements Marks.
func (r *Redis) SentMarks(ctx context.Context, marks []Mark) ([]bool, error) {
	if len(marks) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.IntCmd, len(marks))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range marks {
			sent, _ := markKeys(m)
			if m.Shared {
				cmds[i] = p.GetBit(ctx, sent, idSlot(m.SubscriberID))
			} else {
				cmds[i] = p.Exists(ctx, sent)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %d delivery marks: %w", len(marks), err)
	}
	out := make([]bool, len(marks))
	for i, c := range cmds {
		out[i] = c.Val() == 1
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
