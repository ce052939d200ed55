package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Layout 4 spread the subscribers over Shards shards (shard.go). Layout 3
// kept them in one keyspace: these are its names.
const (
	v3Seq      = "nl:seq"
	v3Subs     = "nl:s:"  // + id/64
	v3Consent  = "nl:cs:" // + id/64
	v3Index    = "nl:ix:"
	v3Active   = "nl:act"
	v3Status   = "nl:st:" // + p, u, b, c (and the marker nl:st:filled)
	v3Topic    = "nl:t:"
	v3Known    = "nl:tknown"
	v3Outbox   = "nl:outbox"
	v3Due      = "nl:outbox:due"
	v3Sent     = "nl:sent:"
	v3Claim    = "nl:claim:"
	v3Claims   = "nl:claims:"
	v3Supp     = "nl:supp:" // + b, c (and the marker nl:supp:filled)
	v3Soft     = "nl:soft:"
	v3Seen     = "nl:fb:seen:"
	v3Onboard  = "nl:onboard"
	v3Push     = "nl:push:"
	v3Hold     = "nl:mhold:" // + kind:hash, or day:kind:hash
	v3Reconf   = "nl:reconfirm:"
	v3SentKeys = "nl:sentkeys"
	v3MailLog  = "nl:ml:"
	v3FBLog    = "nl:fbh:"
	v3Erased   = "nl:erased"
	v3Day      = "nl:day:"
	v3Outcome  = "nl:digest:outcome:"
	v3Scratch  = "nl:stats:scratch"
	// keyUpgradeLock is held by the process that upgrades; the others
	// wait for the layout version to change.
	keyUpgradeLock = "nl:upgrade:lock"
)

// upgradedKeys counts the keys start-up moved into a newer layout, for
// /metrics (UpgradedKeys).
var upgradedKeys atomic.Int64

// UpgradedKeys is how many keys this process's start-up moved into a
// newer layout (newsletter_store_upgraded_keys_total).
func UpgradedKeys() int64 { return upgradedKeys.Load() }

// upgrade4 moves one layout-3 data set into shards. Every step copies
// from the layout-3 keys, which stay until every step is done, and never
// clears what it writes to: a step run again (after a crash, or by a
// second process) writes the same. The keys that move whole (a person's
// own) are renamed, so a second run finds them gone.
type upgrade4 struct {
	r   *Redis
	log *slog.Logger
	// olds are the layout-3 keys read, deleted at the end.
	olds []string
}

// upgradeTo4 moves a layout-3 data set into shards and records layout 4.
// It runs on one Redis (layout 3 never lived on a Cluster). One process
// upgrades; others starting meanwhile wait for it.
func (r *Redis) upgradeTo4(ctx context.Context, log *slog.Logger) (int64, error) {
	for {
		ok, err := r.rdb.SetNX(ctx, keyUpgradeLock, "1", 10*time.Minute).Result()
		if err != nil {
			return 0, fmt.Errorf("upgrade to layout 4: %w", err)
		}
		if ok {
			break
		}
		log.Info("store: another process is moving the data to layout 4; waiting")
		if v, err := r.waitUpgrade(ctx); err != nil || v == strconv.Itoa(Layout) {
			return 0, err
		}
	}
	defer func() {
		// A lock left behind expires; this one is released at once so a
		// process waiting takes over if the upgrade failed.
		if err := r.rdb.Del(context.WithoutCancel(ctx), keyUpgradeLock).Err(); err != nil {
			log.Warn("store: release the upgrade lock", "err", err)
		}
	}()
	if v, err := r.rdb.Get(ctx, keySchema).Result(); err == nil && v == strconv.Itoa(Layout) {
		return 0, nil // done by the process that held the lock
	}
	before := upgradedKeys.Load()
	u := &upgrade4{r: r, log: log}
	for _, step := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"records and the address index", u.records},
		{"consent", u.consent},
		{"bitmaps", u.bitmaps},
		{"delivery claims", u.claims},
		{"each person's keys", u.personal},
		{"lists by id", u.lists},
		{"outbox", u.outbox},
		{"counters, allowances and erasures", u.shared},
		{"id counters", u.seq},
	} {
		if err := step.run(ctx); err != nil {
			return upgradedKeys.Load() - before, fmt.Errorf("upgrade to layout 4: %s: %w", step.name, err)
		}
	}
	u.olds = append(u.olds, v3Scratch, v3Seq)
	for lo := 0; lo < len(u.olds); lo += 1000 {
		if err := r.rdb.Del(ctx, u.olds[lo:min(lo+1000, len(u.olds))]...).Err(); err != nil {
			return upgradedKeys.Load() - before, fmt.Errorf("upgrade to layout 4: delete layout 3's keys: %w", err)
		}
	}
	if err := r.rdb.Set(ctx, keySchema, Layout, 0).Err(); err != nil {
		return upgradedKeys.Load() - before, fmt.Errorf("upgrade to layout 4: record it: %w", err)
	}
	n := upgradedKeys.Load() - before
	log.Info("store: moved the data to layout 4 (subscribers in shards)", "keys", n)
	return n, nil
}

// waitUpgrade polls the layout version while another process holds the
// upgrade lock; it answers the version once the lock is gone.
func (r *Redis) waitUpgrade(ctx context.Context) (string, error) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
		}
		n, err := r.rdb.Exists(ctx, keyUpgradeLock).Result()
		if err != nil {
			return "", err
		}
		if n == 0 {
			v, err := r.rdb.Get(ctx, keySchema).Result()
			if errors.Is(err, redis.Nil) {
				err = nil
			}
			return v, err
		}
	}
}

// scan lists the keys matching pattern.
func (u *upgrade4) scan(ctx context.Context, pattern string) ([]string, error) {
	var out []string
	iter := u.r.rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		out = append(out, iter.Val())
	}
	return out, iter.Err()
}

// addIndexScript adds an id to an address index entry unless it is there.
//
//	KEYS[1]  the index bucket   ARGV[1]  the field   ARGV[2]  the id
var addIndexScript = redis.NewScript(`
local ids = redis.call('HGET', KEYS[1], ARGV[1])
if not ids then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return 1 end
for x in ids:gmatch('[^,]+') do if x == ARGV[2] then return 0 end end
redis.call('HSET', KEYS[1], ARGV[1], ids .. ',' .. ARGV[2])
return 1
`)

// indexLoc is where an address's index entry lives in a shard: its bucket
// and field (ixloc in scripts.go).
func indexLoc(s shard, email string) (key, field string) {
	sum := sha1.Sum([]byte(email))
	h := hex.EncodeToString(sum[:])
	b, _ := strconv.ParseUint(h[:3], 16, 16)
	return s.key(sfxIndex + strconv.FormatUint(b%indexBuckets, 10)), h[3:15]
}

// records re-buckets the records by shard and writes the address index:
// an entry in the subscriber's shard, and where the address's home shard
// is another (an id from before the shards), a pointer there.
func (u *upgrade4) records(ctx context.Context) error {
	keys, err := u.scan(ctx, v3Subs+"*")
	if err != nil {
		return err
	}
	ixs, err := u.scan(ctx, v3Index+"*")
	if err != nil {
		return err
	}
	u.olds = append(append(u.olds, keys...), ixs...)
	for _, k := range keys {
		recs, err := u.r.rdb.HGetAll(ctx, k).Result()
		if err != nil {
			return err
		}
		_, err = u.r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for f, rec := range recs {
				id, err := strconv.ParseInt(f, 10, 64)
				if err != nil || id <= 0 {
					return fmt.Errorf("%s: field %q is no id", k, f)
				}
				s := idShard(id)
				p.HSet(ctx, s.key(sfxSubs+strconv.FormatInt(idSlot(id)/subsPerBucket, 10)), f, rec)
				email := strings.Split(rec, recordSep)
				if len(email) < 5 {
					return fmt.Errorf("%s: the record of %d is unreadable", k, id)
				}
				ix, fl := indexLoc(s, email[4])
				addIndexScript.Eval(ctx, p, []string{ix}, fl, f)
				if home := homeShard(email[4]); home != s {
					ix, fl := indexLoc(home, email[4])
					addIndexScript.Eval(ctx, p, []string{ix}, fl, f)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		upgradedKeys.Add(1)
	}
	return nil
}

// rebucket moves the fields of hashes keyed by id/64 (the consent) into
// the shards' buckets of suffix sfx.
func (u *upgrade4) rebucket(ctx context.Context, pattern, sfx string) error {
	keys, err := u.scan(ctx, pattern)
	if err != nil {
		return err
	}
	u.olds = append(u.olds, keys...)
	for _, k := range keys {
		vals, err := u.r.rdb.HGetAll(ctx, k).Result()
		if err != nil {
			return err
		}
		_, err = u.r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for f, v := range vals {
				id, err := strconv.ParseInt(f, 10, 64)
				if err != nil || id <= 0 {
					return fmt.Errorf("%s: field %q is no id", k, f)
				}
				p.HSet(ctx, idShard(id).key(sfx+strconv.FormatInt(idSlot(id)/subsPerBucket, 10)), f, v)
			}
			return nil
		})
		if err != nil {
			return err
		}
		upgradedKeys.Add(1)
	}
	return nil
}

func (u *upgrade4) consent(ctx context.Context) error {
	return u.rebucket(ctx, v3Consent+"*", sfxConsent)
}

// splitBitmap writes a bitmap indexed by id as the shards' bitmaps of
// suffix sfx, indexed by idSlot, keeping its expiry. A bitmap already
// gone (a run before deleted it) writes nothing.
func (u *upgrade4) splitBitmap(ctx context.Context, old, sfx string) error {
	b, err := u.r.rdb.Get(ctx, old).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return err
	}
	ttl, err := u.r.rdb.PTTL(ctx, old).Result()
	if err != nil {
		return err
	}
	parts := make([][]byte, Shards)
	for i, c := range b {
		for bit := 0; c != 0 && bit < 8; bit++ {
			if c&(0x80>>bit) == 0 {
				continue
			}
			id := int64(i)*8 + int64(bit) // bit 0 is the high bit of the first byte
			s, slot := idShard(id), idSlot(id)
			if need := int(slot/8) + 1; len(parts[s]) < need {
				parts[s] = append(parts[s], make([]byte, need-len(parts[s]))...)
			}
			parts[s][slot/8] |= 0x80 >> (slot % 8)
		}
	}
	_, err = u.r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for s, part := range parts {
			if part == nil {
				continue
			}
			exp := time.Duration(0)
			if ttl > 0 {
				exp = ttl
			}
			p.Set(ctx, shard(s).key(sfx), part, exp)
		}
		return nil
	})
	if err != nil {
		return err
	}
	u.olds = append(u.olds, old)
	upgradedKeys.Add(1)
	return nil
}

// bitmaps splits every bitmap by id: active, statuses, topics, topics
// known, the shared delivery marks and the outcomes.
func (u *upgrade4) bitmaps(ctx context.Context) error {
	pairs := [][2]string{{v3Active, sfxActive}, {v3Known, sfxKnown}}
	for _, c := range []string{"p", "u", "b", "c"} {
		pairs = append(pairs, [2]string{v3Status + c, sfxStatus + c})
	}
	topics, err := u.scan(ctx, v3Topic+"*")
	if err != nil {
		return err
	}
	for _, k := range topics {
		pairs = append(pairs, [2]string{k, sfxTopic + strings.TrimPrefix(k, v3Topic)})
	}
	shared, err := u.r.rdb.ZRange(ctx, v3SentKeys, 0, -1).Result()
	if err != nil {
		return err
	}
	for _, m := range shared {
		pairs = append(pairs, [2]string{v3Sent + m, sfxSent + m})
	}
	outcomes, err := u.scan(ctx, v3Outcome+"*")
	if err != nil {
		return err
	}
	for _, k := range outcomes {
		pairs = append(pairs, [2]string{k, sfxOutcome + strings.TrimPrefix(k, v3Outcome)})
	}
	for _, p := range pairs {
		if err := u.splitBitmap(ctx, p[0], p[1]); err != nil {
			return fmt.Errorf("%s: %w", p[0], err)
		}
	}
	return nil
}

// lastID is the id a per-person key ends in (…:<id>).
func lastID(k string) (int64, bool) {
	i := strings.LastIndexByte(k, ':')
	id, err := strconv.ParseInt(k[i+1:], 10, 64)
	return id, err == nil && id > 0
}

// renameScript moves a key; move renames a layout-3 key into its
// subscriber's shard.
func (u *upgrade4) move(ctx context.Context, old, sfx string, id int64) error {
	if err := renameScript.Run(ctx, u.r.rdb, []string{old, idShard(id).key(sfx)}).Err(); err != nil {
		return fmt.Errorf("%s: %w", old, err)
	}
	upgradedKeys.Add(1)
	return nil
}

// claims moves each person's claims and splits the shared marks' claims
// hashes by shard; and the per-person sent marks (the shared ones are
// bitmaps, split with the others).
func (u *upgrade4) claims(ctx context.Context) error {
	shared, err := u.r.rdb.ZRange(ctx, v3SentKeys, 0, -1).Result()
	if err != nil {
		return err
	}
	isShared := map[string]bool{}
	for _, m := range shared {
		isShared[v3Sent+m] = true
	}
	for _, fam := range []struct{ old, sfx string }{{v3Sent, sfxSent}, {v3Claim, sfxClaim}} {
		keys, err := u.scan(ctx, fam.old+"*")
		if err != nil {
			return err
		}
		for _, k := range keys {
			id, ok := lastID(k)
			if isShared[k] || !ok {
				continue
			}
			if err := u.move(ctx, k, fam.sfx+strings.TrimPrefix(k, fam.old), id); err != nil {
				return err
			}
		}
	}
	hashes, err := u.scan(ctx, v3Claims+"*")
	if err != nil {
		return err
	}
	for _, k := range hashes {
		vals, err := u.r.rdb.HGetAll(ctx, k).Result()
		if err != nil {
			return err
		}
		ttl, err := u.r.rdb.PTTL(ctx, k).Result()
		if err != nil {
			return err
		}
		sfx := sfxClaims + strings.TrimPrefix(k, v3Claims)
		_, err = u.r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for f, v := range vals {
				id, err := strconv.ParseInt(f, 10, 64)
				if err != nil || id <= 0 {
					return fmt.Errorf("%s: field %q is no id", k, f)
				}
				p.HSet(ctx, idShard(id).key(sfx), f, v)
				if ttl > 0 {
					p.PExpire(ctx, idShard(id).key(sfx), ttl)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		u.olds = append(u.olds, k)
		upgradedKeys.Add(1)
	}
	return nil
}

// personal renames each person's own keys into their shard.
func (u *upgrade4) personal(ctx context.Context) error {
	for _, fam := range []struct{ old, sfx string }{
		{v3Soft, sfxSoft}, {v3Reconf, sfxReconfirm}, {v3Push, sfxPush}, {v3MailLog, sfxMailLog}, {v3FBLog, sfxFeedbackLog},
	} {
		keys, err := u.scan(ctx, fam.old+"*")
		if err != nil {
			return err
		}
		for _, k := range keys {
			id, ok := lastID(k)
			if !ok {
				continue
			}
			if err := u.move(ctx, k, fam.sfx+strings.TrimPrefix(k, fam.old), id); err != nil {
				return err
			}
		}
	}
	return nil
}

// lists splits the sorted sets of ids (suppressions, onboarding) by shard,
// and gives every shard the list of shared marks' keys.
func (u *upgrade4) lists(ctx context.Context) error {
	for _, l := range [][2]string{{v3Supp + "b", sfxSupp + "b"}, {v3Supp + "c", sfxSupp + "c"}, {v3Onboard, sfxOnboard}} {
		zs, err := u.r.rdb.ZRangeWithScores(ctx, l[0], 0, -1).Result()
		if err != nil {
			return err
		}
		_, err = u.r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, z := range zs {
				id, err := strconv.ParseInt(z.Member.(string), 10, 64)
				if err != nil || id <= 0 {
					return fmt.Errorf("%s: member %q is no id", l[0], z.Member)
				}
				p.ZAdd(ctx, idShard(id).key(l[1]), z)
			}
			return nil
		})
		if err != nil {
			return err
		}
		u.olds = append(u.olds, l[0])
		upgradedKeys.Add(1)
	}
	zs, err := u.r.rdb.ZRangeWithScores(ctx, v3SentKeys, 0, -1).Result()
	if err != nil || len(zs) == 0 {
		return err
	}
	_, err = u.r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, s := range everyShard() {
			p.ZAdd(ctx, s.key(sfxSentKeys), zs...)
		}
		return nil
	})
	u.olds = append(u.olds, v3SentKeys)
	upgradedKeys.Add(1)
	return err
}

// outbox moves each entry into the outbox of the shard of the subscriber
// its task names (a subscriber_id anywhere in the body), or of shard 0:
// the relay reads every outbox, and a subscriber's scripts that drop
// entries look in their own shard.
func (u *upgrade4) outbox(ctx context.Context) error {
	bodies, err := u.r.rdb.HGetAll(ctx, v3Outbox).Result()
	if err != nil {
		return err
	}
	dues, err := u.r.rdb.ZRangeWithScores(ctx, v3Due, 0, -1).Result()
	if err != nil {
		return err
	}
	due := map[string]float64{}
	for _, z := range dues {
		due[z.Member.(string)] = z.Score
	}
	_, err = u.r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for id, body := range bodies {
			s := shard(0)
			if sub := subscriberIn([]byte(body)); sub > 0 {
				s = idShard(sub)
			}
			p.HSet(ctx, s.key(sfxOutbox), id, body)
			if at, ok := due[id]; ok {
				p.ZAdd(ctx, s.key(sfxDue), redis.Z{Score: at, Member: id})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	u.olds = append(u.olds, v3Outbox, v3Due)
	upgradedKeys.Add(int64(len(bodies)))
	return nil
}

// subscriberIn finds a "subscriber_id" in a JSON document, however deep
// (an outbox entry's task envelope), or 0.
func subscriberIn(body []byte) int64 {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return 0
	}
	var find func(any) int64
	find = func(v any) int64 {
		switch x := v.(type) {
		case map[string]any:
			if n, ok := x["subscriber_id"].(float64); ok && n > 0 {
				return int64(n)
			}
			for _, e := range x {
				if n := find(e); n > 0 {
					return n
				}
			}
		case []any:
			for _, e := range x {
				if n := find(e); n > 0 {
					return n
				}
			}
		case string:
			// A payload kept as a JSON string inside the envelope.
			if strings.Contains(x, "subscriber_id") {
				return subscriberIn([]byte(x))
			}
		}
		return 0
	}
	return find(v)
}

// shared moves what is keyed by neither id nor address: the day's
// counters (into shard 0; the overview sums the shards), the mailbox
// allowances (into the mailbox's home shard, which their hash names), the
// erased addresses and the reports already applied (into every shard:
// their keys hash the address, whose home shard cannot be told from it).
func (u *upgrade4) shared(ctx context.Context) error {
	days, err := u.scan(ctx, v3Day+"*")
	if err != nil {
		return err
	}
	for _, k := range days {
		if err := renameScript.Run(ctx, u.r.rdb, []string{k, shard(0).key(sfxDay + strings.TrimPrefix(k, v3Day))}).Err(); err != nil {
			return err
		}
		upgradedKeys.Add(1)
	}
	holds, err := u.scan(ctx, v3Hold+"*")
	if err != nil {
		return err
	}
	for _, k := range holds {
		rest, sfx := strings.TrimPrefix(k, v3Hold), sfxHold
		if strings.HasPrefix(rest, "day:") {
			rest, sfx = strings.TrimPrefix(rest, "day:"), sfxHoldDay
		}
		sum, err := hex.DecodeString(rest[strings.LastIndexByte(rest, ':')+1:])
		if err != nil || len(sum) < 2 {
			continue // not an allowance
		}
		if err := renameScript.Run(ctx, u.r.rdb, []string{k, shardOfSum(sum).key(sfx + rest)}).Err(); err != nil {
			return err
		}
		upgradedKeys.Add(1)
	}
	erased, err := u.r.rdb.SMembers(ctx, v3Erased).Result()
	if err != nil {
		return err
	}
	seen, err := u.scan(ctx, v3Seen+"*")
	if err != nil {
		return err
	}
	ttls := make([]time.Duration, len(seen))
	for i, k := range seen {
		if ttls[i], err = u.r.rdb.PTTL(ctx, k).Result(); err != nil {
			return err
		}
	}
	_, err = u.r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, s := range everyShard() {
			if len(erased) > 0 {
				p.SAdd(ctx, s.key(sfxErased), anys(erased)...)
			}
			for i, k := range seen {
				if ttls[i] > 0 {
					p.Set(ctx, s.key(sfxSeen+strings.TrimPrefix(k, v3Seen)), "1", ttls[i])
				}
			}
		}
		return nil
	})
	u.olds = append(append(u.olds, v3Erased), seen...)
	upgradedKeys.Add(int64(len(seen)) + 1)
	return err
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// seq starts every shard's id counter past layout 3's last id: the next
// id of shard s is (n+1)*Shards + s > every id given before.
func (u *upgrade4) seq(ctx context.Context) error {
	last, err := u.r.rdb.Get(ctx, v3Seq).Int64()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = u.r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, s := range everyShard() {
			p.Set(ctx, anchor(s), last/Shards, 0)
		}
		return nil
	})
	return err
}
