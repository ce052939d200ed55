package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/address"
)

// Shards is how many logical shards the subscribers are spread over. It is
// fixed (layout 4): a subscriber's shard is part of its id, and the shard
// of an address is a hash of its mailbox, so changing it would move every
// key. 64 spreads the subscribers evenly over any Redis Cluster of up to
// a few dozen primaries, and costs a single Redis nothing: the shards are
// key names there, and every walk reads them in one round trip.
const Shards = 64

// shard is one logical shard. Every key of a shard carries the hash tag
// {sNN}, so all of them sit in one Redis Cluster slot and a script may
// touch any of them together: a person's record, their index entry, their
// bits in the shard's status and topic bitmaps, the shard's outbox and
// counters.
type shard int

// idShard is the shard of subscriber id: its id modulo Shards (newIDLua).
func idShard(id int64) shard { return shard(id % Shards) }

// idSlot is id's bit in its shard's bitmaps: the ids of one shard are
// Shards apart, so their bits are dense.
func idSlot(id int64) int64 { return id / Shards }

// idAt is the id whose bit is slot in shard s's bitmaps.
func idAt(s shard, slot int64) int64 { return slot*Shards + int64(s) }

// mailboxSum is the hash the mailbox's allowances (holdKeys) and its home
// shard (homeShard) are taken from: victim+news@… and victim@… share both.
func mailboxSum(email string) [32]byte { return sha256.Sum256([]byte(address.Mailbox(email))) }

// homeShard is the shard an address is looked up and created in: a new
// subscriber's id is taken there (so its records and bits sit beside its
// index entry), and the address index of that shard answers for it. An id
// from before the shards (layout 3) keeps its number, so its shard may be
// another: the home shard's index then points there (byAddress).
func homeShard(email string) shard {
	sum := mailboxSum(email)
	return shardOfSum(sum[:])
}

func shardOfSum(sum []byte) shard { return shard(binary.BigEndian.Uint16(sum[:2]) % Shards) }

// everyShard lists the shards, in order.
func everyShard() []shard {
	out := make([]shard, Shards)
	for i := range out {
		out[i] = shard(i)
	}
	return out
}

// errGone: asked in the shard its home's index pointed to, the address
// was not there (erased since): the pointer is stale.
var errGone = errors.New("the address's index entry points to a subscriber no longer there")

// unpointScript drops a stale pointer (errGone) from a home shard's
// address index.
//
//	KEYS[1]  the home shard's anchor (sfxSeq)
//	ARGV[1]  email
//	ARGV[2]  the id the pointer named
//
// Writes the index entry without that id. Answers 1.
var unpointScript = subscriberScript(`
unindex(ARGV[1], ARGV[2])
return 1
`)

// byAddress runs a script that finds a subscriber by address (find in
// scripts.go) in the address's home shard, and where its answer is
// 'away' (the subscriber's id lives in another shard) runs it again in
// that one. keys gives the script's KEYS in a shard, after its anchor
// (anchor or visit). Scripts answer 'away' before they
// write anything, and 'gone' (the address not found away from home, where
// nothing may be created) before they write anything too.
func (r *Redis) byAddress(ctx context.Context, script *redis.Script, email string,
	keys func(anchor string, s shard) []string, args []any) ([]string, shard, error) {
	home := homeShard(email)
	s, away := home, int64(0)
	for range 3 {
		a := anchor(s)
		if s != home {
			a = visit(s)
		}
		res, err := script.Run(ctx, r.rdb, keys(a, s), args...).StringSlice()
		if err != nil {
			return nil, s, err
		}
		switch {
		case len(res) == 2 && res[0] == "away":
			id, err := strconv.ParseInt(res[1], 10, 64)
			if err != nil {
				return nil, s, fmt.Errorf("answer %q", res)
			}
			s, away = idShard(id), id
			continue
		case len(res) == 1 && res[0] == "gone" && away != 0:
			if err := unpointScript.Run(ctx, r.rdb, []string{anchor(home)}, email, away).Err(); err != nil {
				return nil, s, err
			}
			s = home
			continue
		}
		return res, s, nil
	}
	return nil, s, fmt.Errorf("%s: %w", email, errGone)
}

// walkIDs finds, in id order, up to limit ids after `after` whose bits are
// set in every term: a term is a list of bitmap suffixes (sfxActive,
// sfxTopic+topic, …) of which any may hold the bit. Every shard's
// bitmaps are read side by side, a stretch of slots at a time, in one
// round trip per stretch; the ids of a stretch come out slot by slot and
// shard by shard, which is id order (idAt). Nothing is written: a walk
// costs Redis no memory, and its cursor is the last id it gave.
func (r *Redis) walkIDs(ctx context.Context, terms [][]string, after int64, limit int) ([]int64, error) {
	out := make([]int64, 0, limit)
	if limit <= 0 || len(terms) == 0 {
		return out, nil
	}
	shards := everyShard()
	start := idSlot(after+1) / 8 // the first byte that may hold an id past after
	// Bytes a shard per stretch: about limit ids when most bits are set.
	size := int64(max(limit/(4*Shards), 8))
	for len(out) < limit {
		reads := make([][][]*redis.StringCmd, len(shards))
		_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, s := range shards {
				reads[i] = make([][]*redis.StringCmd, len(terms))
				for t, alts := range terms {
					for _, sfx := range alts {
						reads[i][t] = append(reads[i][t], p.GetRange(ctx, s.key(sfx), start, start+size-1))
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("walk the bitmaps after %d: %w", after, err)
		}
		more := false
		stretch := make([][]byte, len(shards))
		for i := range shards {
			var goesOn bool
			stretch[i], goesOn = termBits(reads[i], size)
			more = more || goesOn
		}
		for j := int64(0); j < size*8 && len(out) < limit; j++ {
			byteAt, mask := j/8, byte(0x80>>(j%8)) // bit 0 is the high bit of the first byte
			for i, s := range shards {
				b := stretch[i]
				if byteAt >= int64(len(b)) || b[byteAt]&mask == 0 {
					continue
				}
				if id := idAt(s, start*8+j); id > after {
					out = append(out, id)
					if len(out) == limit {
						break
					}
				}
			}
		}
		if !more {
			break // every bitmap ended in this stretch
		}
		start += size
		size = min(size*2, 8<<10)
	}
	return out, nil
}

// walkSlotBits is how many low bits of a walk key (WalkKey) hold the
// slot: ids stay under 2^46 (a trillion per shard), and keys under
// 2^53, so scripts, whose numbers are doubles, compare them exactly.
const walkSlotBits = 40

// WalkKey is where subscriber id comes in a walk shard by shard
// (walkShards): shard 0's ids in id order, then shard 1's, and so on.
// Keys only grow along that walk, so a walk shard by shard keeps its
// place and counts what it planned by them as one in id order does by
// ids (the issue planner).
func WalkKey(id int64) int64 { return int64(idShard(id))<<walkSlotBits | idSlot(id) }

// walkShards finds up to limit ids whose bits are set in every term (as
// walkIDs) with a walk key (WalkKey) above after, in walk-key order: one
// shard after the other. A run of ids it gives sits in one shard, or two
// where it crosses from one to the next, so a batch cut from it touches
// one or two shards' keys (and, on a cluster, one or two primaries)
// rather than nearly all 64 as a stretch of ids in id order does. Dense
// shards cost one round trip a read; where shards end inside a read
// (a short list), the next round trip reads twice as many shards side by
// side. Nothing is written.
func (r *Redis) walkShards(ctx context.Context, terms [][]string, after int64, limit int) ([]int64, error) {
	out := make([]int64, 0, limit)
	if limit <= 0 || len(terms) == 0 || after < 0 {
		return out, nil
	}
	s := shard(after >> walkSlotBits)
	from := after&(1<<walkSlotBits-1) + 1 // the first slot of s still to give
	// Bytes a shard per read: twice limit slots, enough for limit ids
	// when half the bits are set; a shard that goes on is read on with
	// twice as many.
	size := int64(max(limit/4, 8))
	span := 1
	for s < Shards && len(out) < limit {
		n := min(span, Shards-int(s))
		start := func(i int) int64 {
			if i == 0 {
				return from / 8
			}
			return 0
		}
		reads := make([][][]*redis.StringCmd, n)
		_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range n {
				reads[i] = make([][]*redis.StringCmd, len(terms))
				for t, alts := range terms {
					for _, sfx := range alts {
						reads[i][t] = append(reads[i][t], p.GetRange(ctx, (s+shard(i)).key(sfx), start(i), start(i)+size-1))
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("walk shard %d from slot %d: %w", s, from, err)
		}
		next, nextFrom := s+shard(n), int64(0)
		for i := range n {
			bits, more := termBits(reads[i], size)
			first := start(i) * 8
			for j := range int64(len(bits)) * 8 {
				slot := first + j
				if bits[j/8]&byte(0x80>>(j%8)) == 0 || (i == 0 && slot < from) {
					continue
				}
				out = append(out, idAt(s+shard(i), slot))
				if len(out) == limit {
					return out, nil
				}
			}
			if more {
				// This shard goes on past the read: on with it alone.
				next, nextFrom = s+shard(i), first+size*8
				break
			}
		}
		if next == s+shard(n) {
			span = min(span*2, Shards) // every shard read ended: more at once
		} else {
			span, size = 1, min(size*2, 8<<10)
		}
		s, from = next, nextFrom
	}
	return out, nil
}

// termBits is one shard's stretch of the bits set in every term (each
// term's alternatives ORed, the terms ANDed), from reads of size bytes,
// and whether any bitmap went on past the stretch.
func termBits(reads [][]*redis.StringCmd, size int64) (bits []byte, more bool) {
	for t := range reads {
		var anyOf []byte
		for _, c := range reads[t] {
			b := c.Val()
			more = more || int64(len(b)) == size
			anyOf = orBytes(anyOf, b)
		}
		if t == 0 {
			bits = anyOf
		} else {
			bits = andBytes(bits, anyOf)
		}
	}
	return bits, more
}

// orBytes is a OR b, as long as the longer.
func orBytes(a []byte, b string) []byte {
	out := make([]byte, max(len(a), len(b)))
	copy(out, a)
	for i := range len(b) {
		out[i] |= b[i]
	}
	return out
}

// andBytes is a AND b, as long as the shorter (past it, bits are 0).
func andBytes(a, b []byte) []byte {
	out := make([]byte, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] & b[i]
	}
	return out
}

// audienceScript counts one shard's active subscribers with any of some
// topics: the topics' bitmaps ORed, ANDed with the active one, in the
// shard's scratch key (deleted before the script ends; it holds a copy of
// the bitmaps' size, an eighth of a byte a subscriber, that long).
//
//	KEYS[1]  the shard's anchor
//	ARGV     the topics' bitmaps' suffixes (sfxTopic + topic)
//
// Answers the count.
var audienceScript = subscriberScript(`
local SCRATCH = PFX .. 'scratch'
local topics = {}
for i = 1, #ARGV do topics[i] = PFX .. ARGV[i] end
redis.call('BITOP', 'OR', SCRATCH, unpack(topics))
redis.call('BITOP', 'AND', SCRATCH, SCRATCH, ACTIVE)
local n = redis.call('BITCOUNT', SCRATCH)
redis.call('DEL', SCRATCH)
return n
`)

// audience is how many active subscribers have any of topicIDs on: every
// shard counts its own (audienceScript), in one round trip.
func (r *Redis) audience(ctx context.Context, topicIDs []string) (int64, error) {
	if len(topicIDs) == 0 {
		return 0, nil
	}
	args := make([]any, len(topicIDs))
	for i, t := range topicIDs {
		args[i] = topicSfx(t)
	}
	shards := everyShard()
	all := make([][]any, len(shards))
	for i := range all {
		all[i] = args
	}
	cmds, err := runPipelined(ctx, r.rdb, audienceScript, func(i int) []string { return []string{anchor(shards[i])} }, all)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cmds {
		v, err := c.Int64()
		if err != nil {
			return 0, err
		}
		n += v
	}
	return n, nil
}

// bitCounts sums, for each suffix, the set bits of that bitmap over every
// shard, in one round trip.
func (r *Redis) bitCounts(ctx context.Context, sfxs ...string) ([]int64, error) {
	cmds := make([][]*redis.IntCmd, len(sfxs))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sfx := range sfxs {
			for _, s := range everyShard() {
				cmds[i] = append(cmds[i], p.BitCount(ctx, s.key(sfx), nil))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(sfxs))
	for i := range sfxs {
		for _, c := range cmds[i] {
			out[i] += c.Val()
		}
	}
	return out, nil
}
