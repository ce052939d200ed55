package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// walkIDsBefore is walkIDs backwards: up to limit ids below before whose
// bits are set in every term, highest first. Every shard's bitmaps are
// read side by side, a stretch at a time going down, in one round trip
// per stretch; nothing is written.
func (r *Redis) walkIDsBefore(ctx context.Context, terms [][]string, before int64, limit int) ([]int64, error) {
	out := make([]int64, 0, limit)
	if limit <= 0 || len(terms) == 0 || before <= 1 {
		return out, nil
	}
	shards := everyShard()
	end := idSlot(before-1) / 8 // the last byte that may hold an id below before
	size := int64(max(limit/(4*Shards), 8))
	for len(out) < limit && end >= 0 {
		start := max(end-size+1, 0)
		reads := make([][][]*redis.StringCmd, len(shards))
		_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, s := range shards {
				reads[i] = make([][]*redis.StringCmd, len(terms))
				for t, alts := range terms {
					for _, sfx := range alts {
						reads[i][t] = append(reads[i][t], p.GetRange(ctx, s.key(sfx), start, end))
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("walk the bitmaps before %d: %w", before, err)
		}
		stretch := make([][]byte, len(shards))
		for i := range shards {
			stretch[i], _ = termBits(reads[i], end-start+1)
		}
		for j := (end-start+1)*8 - 1; j >= 0 && len(out) < limit; j-- {
			byteAt, mask := j/8, byte(0x80>>(j%8))
			for i := len(shards) - 1; i >= 0; i-- {
				b := stretch[i]
				if byteAt >= int64(len(b)) || b[byteAt]&mask == 0 {
					continue
				}
				if id := idAt(shards[i], start*8+j); id < before {
					out = append(out, id)
					if len(out) == limit {
						break
					}
				}
			}
		}
		end = start - 1
		size = min(size*2, 8<<10)
	}
	return out, nil
}

// countTermsScript counts one shard's subscribers whose bits are set in
// every term (walkIDs' terms): each term's bitmaps ORed, the terms
// ANDed, in the shard's scratch keys (deleted before the script ends).
//
//	KEYS[1]  the shard's anchor
//	ARGV     one term each: its bitmaps' suffixes, comma-separated
//
// Answers the count.
var countTermsScript = subscriberScript(`
local SCRATCH, TERM = PFX .. 'scratch', PFX .. 'scratch:term'
for i = 1, #ARGV do
  local alts = {}
  for a in ARGV[i]:gmatch('[^,]+') do alts[#alts + 1] = PFX .. a end
  local into = SCRATCH
  if i > 1 then into = TERM end
  redis.call('BITOP', 'OR', into, unpack(alts))
  if i > 1 then redis.call('BITOP', 'AND', SCRATCH, SCRATCH, TERM) end
end
local n = redis.call('BITCOUNT', SCRATCH)
redis.call('DEL', SCRATCH, TERM)
return n
`)

// countTerms is how many subscribers walkIDs would give for terms: every
// shard counts its own (countTermsScript), in one round trip.
func (r *Redis) countTerms(ctx context.Context, terms [][]string) (int64, error) {
	args := make([]any, len(terms))
	for i, t := range terms {
		args[i] = strings.Join(t, ",")
	}
	shards := everyShard()
	all := make([][]any, len(shards))
	for i := range all {
		all[i] = args
	}
	cmds, err := runPipelined(ctx, r.rdb, countTermsScript, func(i int) []string { return []string{anchor(shards[i])} }, all)
	if err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	var n int64
	for _, c := range cmds {
		v, err := c.Int64()
		if err != nil {
			return 0, fmt.Errorf("count: %w", err)
		}
		n += v
	}
	return n, nil
}
