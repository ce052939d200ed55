package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"time"
)

// SegmentCount implements Segments: every shard's bitmaps in one round
// trip, combined in Go; those in doubt decided by their values.
func (r *Redis) SegmentCount(ctx context.Context, expr string) (SegmentCount, error) {
	limit := cmp.Or(r.countTimeout, SegmentCountTimeout)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	n, err := r.segmentCount(ctx, expr)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return SegmentCount{}, fmt.Errorf("%w (%s)", ErrSegmentCountSlow, limit)
	}
	return n, err
}

// SegmentCountTimeout bounds a count (a viewer's, which follows the
// typing, and the Segments screen's): past it the count answers
// ErrSegmentCountSlow rather than hold Redis and a core. A send's
// audience is not bounded so: it reads a shard at a time.
const SegmentCountTimeout = 10 * time.Second

// WithSegmentCountTimeout returns the store whose counts give up after
// d (0: SegmentCountTimeout).
func (r *Redis) WithSegmentCountTimeout(d time.Duration) *Redis {
	c := *r
	c.countTimeout = d
	return &c
}

func (r *Redis) segmentCount(ctx context.Context, expr string) (SegmentCount, error) {
	p, err := r.planSegment(ctx, expr)
	if err != nil {
		return SegmentCount{}, err
	}
	sbs, err := r.readShards(ctx, p, everyShard())
	if err != nil {
		return SegmentCount{}, err
	}
	var out SegmentCount
	var doubt []int64
	byShard := map[shard]*shardBits{}
	for _, sb := range sbs {
		if err := ctx.Err(); err != nil {
			return SegmentCount{}, err
		}
		byShard[sb.s] = sb
		b := p.eval(p.expr.Root, sb)
		active := sb.maps[0]
		for i := range b.lo {
			out.Matching += int64(bits.OnesCount8(b.lo[i]))
			out.Active += int64(bits.OnesCount8(b.lo[i] & active[i]))
			if in := b.hi[i] &^ b.lo[i]; in != 0 {
				for j := range 8 {
					if in&(0x80>>j) != 0 {
						doubt = append(doubt, idAt(sb.s, int64(i*8+j)))
					}
				}
			}
		}
	}
	for lo := 0; lo < len(doubt); lo += decideChunk {
		if err := ctx.Err(); err != nil {
			return SegmentCount{}, err
		}
		chunk := doubt[lo:min(lo+decideChunk, len(doubt))]
		ok, err := r.decide(ctx, p, chunk, byShard)
		if err != nil {
			return SegmentCount{}, err
		}
		for i, id := range chunk {
			if ok[i] {
				out.Matching++
				if bitAt(string(byShard[idShard(id)].maps[0]), idSlot(id)) {
					out.Active++
				}
			}
		}
	}
	return out, nil
}

// SegmentAudienceByShard implements Segments: a shard at a time, its
// bitmaps read whole (an eighth of a byte a person), the active people
// the expression surely holds for taken in slot order, those in doubt
// decided a chunk at a time as the walk reaches them.
func (r *Redis) SegmentAudienceByShard(ctx context.Context, expr string, after int64, limit int) ([]int64, error) {
	out := make([]int64, 0, max(limit, 0))
	if limit <= 0 || after < 0 {
		return out, nil
	}
	p, err := r.planSegment(ctx, expr)
	if err != nil {
		return nil, err
	}
	s := shard(after >> walkSlotBits)
	from := after&(1<<walkSlotBits-1) + 1
	// The shards ahead are read a few at a time: a short list ends
	// within one.
	var ahead []*shardBits
	for ; s < Shards && len(out) < limit; s, from = s+1, 0 {
		if len(ahead) == 0 {
			next := make([]shard, 0, segReadAhead)
			for t := s; t < Shards && len(next) < segReadAhead; t++ {
				next = append(next, t)
			}
			if ahead, err = r.readShards(ctx, p, next); err != nil {
				return nil, err
			}
		}
		sb := ahead[0]
		ahead = ahead[1:]
		if out, err = r.shardSegmentAudience(ctx, p, s, sb, from, out, limit); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// shardSegmentAudience appends to out, up to limit, the active people of
// shard s (its bitmaps sb) from slot from on whom p holds for, in slot
// order: those p surely holds for at once, those in doubt decided a chunk
// at a time.
func (r *Redis) shardSegmentAudience(ctx context.Context, p *segPlan, s shard, sb *shardBits, from int64, out []int64, limit int) ([]int64, error) {
	b := p.eval(p.expr.Root, sb)
	active := sb.maps[0]
	one := map[shard]*shardBits{s: sb}
	type cand struct {
		id    int64
		doubt bool
	}
	var cands []cand
	flush := func() error {
		var doubt []int64
		for _, c := range cands {
			if c.doubt {
				doubt = append(doubt, c.id)
			}
		}
		var ok []bool
		if len(doubt) > 0 {
			var err error
			if ok, err = r.decide(ctx, p, doubt, one); err != nil {
				return err
			}
		}
		k := 0
		for _, c := range cands {
			if c.doubt {
				k++
				if !ok[k-1] {
					continue
				}
			}
			if len(out) < limit {
				out = append(out, c.id)
			}
		}
		cands = cands[:0]
		return nil
	}
	for slot := from; slot < int64(len(sb.all))*8 && len(out) < limit; slot++ {
		i, m := slot/8, byte(0x80>>(slot%8))
		if active[i]&m == 0 || b.hi[i]&m == 0 {
			continue
		}
		cands = append(cands, cand{idAt(s, slot), b.lo[i]&m == 0})
		// Decided when they may fill the page, or a round trip's
		// worth: not one by one as the page nears full.
		if len(cands) >= min(max(limit-len(out), 256), decideChunk) {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}
