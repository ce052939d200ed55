package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/segment"
	"github.com/redis/go-redis/v9"
)

// segPlan is an expression ready to evaluate: the bitmaps each shard
// reads (the statuses first: the active one, then statusBitmap of
// pending, unsubscribed, bounced, complained), which one each term reads,
// and what a person in doubt needs read.
type segPlan struct {
	expr    segment.Expr
	defs    map[string]FieldDef
	bitmaps []string
	leaf    map[*segment.Term]int
	joined  bool // a joined term: the join index is read, and the records of those in doubt
	fields  bool // a field term: the values of those in doubt are read
}

// segStatuses are the status bitmaps every plan reads first, in order.
var segStatuses = []Status{Active, Pending, Unsubscribed, Bounced, Complained}

func (r *Redis) planSegment(ctx context.Context, src string) (*segPlan, error) {
	e, err := segment.Parse(src)
	if err != nil {
		return nil, err
	}
	p := &segPlan{expr: e, leaf: map[*segment.Term]int{}}
	schema := segment.Schema{Topics: r.tl().ids, Fields: map[string]segment.FieldType{}}
	for _, st := range Statuses {
		schema.Statuses = append(schema.Statuses, string(st))
	}
	var needTags, needFields bool
	for _, t := range e.Terms() {
		needTags = needTags || t.Kind == segment.Tag
		needFields = needFields || t.Kind == segment.Field
	}
	if needTags {
		if schema.Tags, err = r.KnownTags(ctx); err != nil {
			return nil, err
		}
	}
	if needFields {
		if p.defs, err = r.fieldDefsByName(ctx); err != nil {
			return nil, err
		}
		for n, d := range p.defs {
			schema.Fields[n] = segment.FieldType{Type: string(d.Type), Choices: d.Choices}
		}
	}
	if err := e.Check(schema); err != nil {
		return nil, err
	}
	for _, st := range segStatuses {
		p.bitmaps = append(p.bitmaps, statusBitmap(st))
	}
	at := map[string]int{}
	for i, b := range p.bitmaps {
		at[b] = i
	}
	for _, t := range e.Terms() {
		var sfx string
		switch t.Kind {
		case segment.Topic:
			sfx = topicSfx(t.Name)
		case segment.Tag:
			sfx = tagSfx(t.Name)
		case segment.Status:
			sfx = statusBitmap(Status(t.Name))
		case segment.Joined:
			p.joined = true
			continue
		case segment.Field:
			p.fields = true
			continue
		}
		i, ok := at[sfx]
		if !ok {
			i = len(p.bitmaps)
			at[sfx] = i
			p.bitmaps = append(p.bitmaps, sfx)
		}
		p.leaf[t] = i
	}
	return p, nil
}

// shardBits is what one shard's evaluation reads: its bitmaps (each
// padded to the same length), the union of its statuses (everyone in
// it), and its join index.
type shardBits struct {
	s    shard
	maps [][]byte
	all  []byte
	jday map[string]string
}

// readShards reads the plan's bitmaps and join index of shards, in one
// round trip.
func (r *Redis) readShards(ctx context.Context, p *segPlan, shards []shard) ([]*shardBits, error) {
	gets := make([][]*redis.StringCmd, len(shards))
	jdays := make([]*redis.MapStringStringCmd, len(shards))
	if _, err := r.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, s := range shards {
			for _, b := range p.bitmaps {
				gets[i] = append(gets[i], pl.Get(ctx, s.key(b)))
			}
			if p.joined {
				jdays[i] = pl.HGetAll(ctx, s.key(sfxJoinDay))
			}
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read the segment's bitmaps: %w", err)
	}
	out := make([]*shardBits, len(shards))
	for i, s := range shards {
		sb := &shardBits{s: s}
		n := 0
		for _, c := range gets[i] {
			if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
				return nil, fmt.Errorf("read the segment's bitmaps: %w", err)
			}
			n = max(n, len(c.Val()))
		}
		// The union of the statuses is everyone in the shard: a bit
		// past it (a topic's, say, of someone erased) is nobody's.
		sb.all = make([]byte, n)
		for j, c := range gets[i] {
			b := make([]byte, n)
			copy(b, c.Val())
			sb.maps = append(sb.maps, b)
			if j < len(segStatuses) {
				orInto(sb.all, b)
			}
		}
		if p.joined {
			sb.jday = jdays[i].Val()
		}
		out[i] = sb
	}
	return out, nil
}

func orInto(dst, src []byte) {
	for i := range dst {
		dst[i] |= src[i]
	}
}

// bounds is a node's value over a shard: lo the people it surely holds
// for, hi those it may hold for (lo within hi); the ones between are in
// doubt, and are decided by their values (exact).
type bounds struct{ lo, hi []byte }

func (p *segPlan) eval(n segment.Node, sb *shardBits) bounds {
	size := len(sb.all)
	switch n := n.(type) {
	case *segment.And:
		a, b := p.eval(n.L, sb), p.eval(n.R, sb)
		for i := range size {
			a.lo[i] &= b.lo[i]
			a.hi[i] &= b.hi[i]
		}
		return a
	case *segment.Or:
		a, b := p.eval(n.L, sb), p.eval(n.R, sb)
		for i := range size {
			a.lo[i] |= b.lo[i]
			a.hi[i] |= b.hi[i]
		}
		return a
	case *segment.Not:
		return notBounds(p.eval(n.X, sb), sb.all)
	case *segment.Term:
		switch n.Kind {
		case segment.Field:
			// Anyone may hold a value that matches.
			return bounds{make([]byte, size), slices.Clone(sb.all)}
		case segment.Joined:
			return p.joinedBounds(n, sb)
		}
		b := slices.Clone(sb.maps[p.leaf[n]])
		for i := range size {
			b[i] &= sb.all[i]
		}
		return bounds{b, slices.Clone(b)}
	}
	panic(fmt.Sprintf("segment: node %T", n))
}

func notBounds(b bounds, all []byte) bounds {
	lo, hi := make([]byte, len(all)), make([]byte, len(all))
	for i := range all {
		lo[i] = all[i] &^ b.hi[i]
		hi[i] = all[i] &^ b.lo[i]
	}
	return bounds{lo, hi}
}

// joinedBounds answers a joined term from the shard's join index: ids
// grow with time within a shard, so the people who joined on day D or
// later are the slots from the index's first slot of the first day at
// or past D. Slots before the index's first entry (people from before
// it was kept) are in doubt, decided by their records.
func (p *segPlan) joinedBounds(t *segment.Term, sb *shardBits) bounds {
	d, _ := time.Parse(time.DateOnly, t.Value)
	day, next := d.Format(time.DateOnly), d.AddDate(0, 0, 1).Format(time.DateOnly)
	indexed := int64(-1) // the first slot the index covers; -1: none
	for _, v := range sb.jday {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && (indexed < 0 || s < indexed) {
			indexed = s
		}
	}
	// from(D) is the first slot that joined on day D or later.
	from := func(day string) int64 {
		first := int64(-1)
		for k, v := range sb.jday {
			s, err := strconv.ParseInt(v, 10, 64)
			if err == nil && k >= day && (first < 0 || s < first) {
				first = s
			}
		}
		if first < 0 {
			return int64(len(sb.all)) * 8 // nobody yet
		}
		return first
	}
	geDay := slotsFrom(from(day), indexed, sb.all)
	geNext := slotsFrom(from(next), indexed, sb.all)
	switch t.Op {
	case ">=":
		return geDay
	case ">":
		return geNext
	case "<":
		return notBounds(geDay, sb.all)
	case "<=":
		return notBounds(geNext, sb.all)
	}
	on := andBounds(geDay, notBounds(geNext, sb.all))
	if t.Op == "!=" {
		return notBounds(on, sb.all)
	}
	return on
}

func andBounds(a, b bounds) bounds {
	for i := range a.lo {
		a.lo[i] &= b.lo[i]
		a.hi[i] &= b.hi[i]
	}
	return a
}

// slotsFrom is the bounds of "slot >= from" where the slots before
// indexed (all of them when indexed < 0) are in doubt.
func slotsFrom(from, indexed int64, all []byte) bounds {
	lo, hi := make([]byte, len(all)), make([]byte, len(all))
	for i := range int64(len(all)) * 8 {
		if all[i/8]&(0x80>>(i%8)) == 0 {
			continue
		}
		known := indexed >= 0 && i >= indexed
		if (known && i >= from) || !known {
			hi[i/8] |= 0x80 >> (i % 8)
		}
		if known && i >= from {
			lo[i/8] |= 0x80 >> (i % 8)
		}
	}
	return bounds{lo, hi}
}

// personVals are what the exact evaluation of one person reads.
type personVals struct {
	slot   int64
	sb     *shardBits
	fields map[string]string
	joined string // the day they were created, YYYY-MM-DD (UTC)
}

// exact evaluates n for one person.
func (p *segPlan) exact(n segment.Node, v *personVals) bool {
	switch n := n.(type) {
	case *segment.And:
		return p.exact(n.L, v) && p.exact(n.R, v)
	case *segment.Or:
		return p.exact(n.L, v) || p.exact(n.R, v)
	case *segment.Not:
		return !p.exact(n.X, v)
	case *segment.Term:
		switch n.Kind {
		case segment.Field:
			return segment.Compare(string(p.defs[n.Name].Type), v.fields[n.Name], n.Op, n.Value)
		case segment.Joined:
			return v.joined != "" && segment.Holds(strings.Compare(v.joined, n.Value), n.Op)
		}
		return bitAt(string(v.sb.maps[p.leaf[n]]), v.slot)
	}
	return false
}

// decide evaluates the people in doubt (ids, each with its shard's bits)
// exactly: their field values and records read in one round trip.
func (r *Redis) decide(ctx context.Context, p *segPlan, ids []int64, sbs map[shard]*shardBits) ([]bool, error) {
	var fields, recs []string
	var err error
	if p.fields {
		if fields, err = r.bucketValues(ctx, sfxFieldValues, ids); err != nil {
			return nil, fmt.Errorf("read the field values of %d people: %w", len(ids), err)
		}
	}
	if p.joined {
		if recs, err = r.bucketValues(ctx, sfxSubs, ids); err != nil {
			return nil, fmt.Errorf("read the records of %d people: %w", len(ids), err)
		}
	}
	out := make([]bool, len(ids))
	for i, id := range ids {
		v := &personVals{slot: idSlot(id), sb: sbs[idShard(id)]}
		if p.fields {
			v.fields = unpackFields(fields[i])
		}
		if p.joined {
			if sub, err := decodeRecord(strconv.FormatInt(id, 10), recs[i]); err == nil && !sub.CreatedAt.IsZero() {
				v.joined = sub.CreatedAt.UTC().Format(time.DateOnly)
			}
		}
		out[i] = p.exact(p.expr.Root, v)
	}
	return out, nil
}

// segReadAhead is how many shards a segment's walk reads at once.
const segReadAhead = 8

// decideChunk bounds the people in doubt decided in one round trip.
const decideChunk = 4096
