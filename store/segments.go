package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/segment"
)

// Segments are named expressions over the people (internal/segment): a
// send reaches a segment's active people, and its count is live. The
// evaluation reads each shard's bitmaps of the terms (topics, tags,
// statuses) and combines them in Go; a term the bitmaps cannot answer
// (a field, a join date before the join index) leaves people in doubt,
// and only those have their values read.

// Segment is a saved expression.
type Segment struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	Expr      string    `json:"expr"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SegmentCount is how many people an expression matches now: Active
// counts the active ones (the audience of a send), Matching those of any
// status.
type SegmentCount struct {
	Active   int64 `json:"active"`
	Matching int64 `json:"matching"`
}

// MaxSegmentName bounds a segment's name.
const MaxSegmentName = 100

// Errors of the segments.
var (
	ErrNoSegment = errors.New("no such segment")
	// ErrSegmentName: a name that is taken, or not one line of 1 to
	// MaxSegmentName characters with a letter in it (a name of digits
	// alone would read as an id).
	ErrSegmentName = errors.New("bad segment name")
	// ErrSegmentTaken: the name is another segment's (it matches
	// ErrSegmentName too).
	ErrSegmentTaken = errors.New("the name is another segment's")
	// ErrSegmentCountSlow: a count that did not finish within its bound
	// (SegmentCountTimeout); nothing is counted.
	ErrSegmentCountSlow = errors.New("the count did not finish in time: make the expression narrower (fewer terms, fewer field. terms), or count again when the list is quieter")
)

// Segments keeps the segments and evaluates expressions.
type Segments interface {
	// CreateSegment saves a new segment; the expression is checked
	// (CheckSegment). A name taken: ErrSegmentName.
	CreateSegment(ctx context.Context, name, expr string) (Segment, error)
	// UpdateSegment replaces a segment's name and expression.
	UpdateSegment(ctx context.Context, id int64, name, expr string) (Segment, error)
	// DeleteSegment forgets a segment (ErrNoSegment when there is none).
	DeleteSegment(ctx context.Context, id int64) error
	// ListSegments lists the segments by id.
	ListSegments(ctx context.Context) ([]Segment, error)
	// GetSegment finds a segment by id (digits) or by name.
	GetSegment(ctx context.Context, idOrName string) (Segment, error)
	// CheckSegment parses expr and holds it against the topics, the
	// known tags and the declared fields: a *segment.Error says where
	// it is wrong.
	CheckSegment(ctx context.Context, expr string) (segment.Expr, error)
	// SegmentCount counts the people expr matches now.
	SegmentCount(ctx context.Context, expr string) (SegmentCount, error)
	// IssueSegmentExpr is the expression of the readers of an issue
	// with a segment (its segment's and topics': AudienceExpr);
	// ErrNoSegment when the segment is gone.
	IssueSegmentExpr(ctx context.Context, c IssueContent) (string, error)
	// SegmentAudienceByShard lists up to limit active people expr
	// matches, whose walk keys (WalkKey) are past after, in walk-key
	// order, as AudienceByShard does for topics.
	SegmentAudienceByShard(ctx context.Context, expr string, after int64, limit int) ([]int64, error)
}

// AudienceExpr is the expression of an issue's readers: its segment's
// expression, and any of its topics when it names topics too.
func AudienceExpr(segmentExpr string, topics []string) string {
	if len(topics) == 0 {
		return "(" + segmentExpr + ")"
	}
	terms := make([]string, len(topics))
	for i, t := range topics {
		terms[i] = "topic:" + t
	}
	return "(" + segmentExpr + ") AND (" + strings.Join(terms, " OR ") + ")"
}

// IssueSegmentExpr is the expression of issue content c's readers when
// c names a segment (AudienceExpr); ErrNoSegment when it is gone.
func (r *Redis) IssueSegmentExpr(ctx context.Context, c IssueContent) (string, error) {
	seg, err := r.GetSegment(ctx, strconv.FormatInt(c.Segment, 10))
	if err != nil {
		return "", fmt.Errorf("the issue's segment %d: %w", c.Segment, err)
	}
	return AudienceExpr(seg.Expr, c.Topics), nil
}

// checkSegmentName tells a valid name.
func checkSegmentName(name string) error {
	n := utf8.RuneCountInString(name)
	if n == 0 || n > MaxSegmentName || !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0 ||
		strings.IndexFunc(name, func(r rune) bool { return !unicode.IsDigit(r) }) < 0 || strings.TrimSpace(name) != name {
		return fmt.Errorf("%w %q: one line of 1 to %d characters, not digits alone, no space around", ErrSegmentName, name, MaxSegmentName)
	}
	return nil
}

// saveSegmentScript creates or replaces a segment.
//
//	KEYS[1]  the segment counter (keySegmentSeq)
//	KEYS[2]  the segments (keySegments)
//	KEYS[3]  the names (keySegmentName)
//	ARGV[1]  id; "" for a new segment
//	ARGV[2]  name
//	ARGV[3]  expression
//	ARGV[4]  now, unix ms
//
// Writes the segment (name SEP expr SEP created SEP updated) and its
// name, freeing the name it had. Answers 'ok', the id and created;
// 'taken' (the name is another's) or 'notfound'.
var saveSegmentScript = redis.NewScript(`
local SEP = '\31'
local id, created = ARGV[1], ARGV[4]
local owner = redis.call('HGET', KEYS[3], ARGV[2])
if id == '' then
  if owner then return {'taken'} end
  id = tostring(redis.call('INCR', KEYS[1]))
else
  local was = redis.call('HGET', KEYS[2], id)
  if not was then return {'notfound'} end
  if owner and owner ~= id then return {'taken'} end
  local oldname, _, c = string.match(was, '^([^' .. SEP .. ']*)' .. SEP .. '([^' .. SEP .. ']*)' .. SEP .. '([^' .. SEP .. ']*)')
  created = c
  redis.call('HDEL', KEYS[3], oldname)
end
redis.call('HSET', KEYS[2], id, table.concat({ARGV[2], ARGV[3], created, ARGV[4]}, SEP))
redis.call('HSET', KEYS[3], ARGV[2], id)
return {'ok', id, created}
`)

// deleteSegmentScript forgets a segment and its name.
//
//	KEYS[1]  the segments (keySegments)
//	KEYS[2]  the names (keySegmentName)
//	ARGV[1]  id
//
// Answers 1, or 0 when there is no such segment.
var deleteSegmentScript = redis.NewScript(`
local was = redis.call('HGET', KEYS[1], ARGV[1])
if not was then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], string.match(was, '^([^\31]*)'))
return 1
`)

// CreateSegment implements Segments.
func (r *Redis) CreateSegment(ctx context.Context, name, expr string) (Segment, error) {
	return r.saveSegment(ctx, "", name, expr)
}

// UpdateSegment implements Segments.
func (r *Redis) UpdateSegment(ctx context.Context, id int64, name, expr string) (Segment, error) {
	if id <= 0 {
		return Segment{}, ErrNoSegment
	}
	return r.saveSegment(ctx, strconv.FormatInt(id, 10), name, expr)
}

func (r *Redis) saveSegment(ctx context.Context, id, name, expr string) (Segment, error) {
	if err := checkSegmentName(name); err != nil {
		return Segment{}, err
	}
	if _, err := r.CheckSegment(ctx, expr); err != nil {
		return Segment{}, err
	}
	now := r.now().UTC().Truncate(time.Millisecond)
	res, err := saveSegmentScript.Run(ctx, r.rdb, []string{keySegmentSeq, keySegments, keySegmentName}, id, name, expr, now.UnixMilli()).StringSlice()
	if err != nil {
		return Segment{}, fmt.Errorf("save segment %q: %w", name, err)
	}
	switch res[0] {
	case "taken":
		return Segment{}, fmt.Errorf("%w %q: %w", ErrSegmentName, name, ErrSegmentTaken)
	case "notfound":
		return Segment{}, ErrNoSegment
	}
	n, _ := strconv.ParseInt(res[1], 10, 64)
	return Segment{ID: n, Name: name, Expr: expr, CreatedAt: msTime(res[2]), UpdatedAt: now}, nil
}

// DeleteSegment implements Segments.
func (r *Redis) DeleteSegment(ctx context.Context, id int64) error {
	n, err := deleteSegmentScript.Run(ctx, r.rdb, []string{keySegments, keySegmentName}, id).Int()
	if err != nil {
		return fmt.Errorf("delete segment %d: %w", id, err)
	}
	if n == 0 {
		return ErrNoSegment
	}
	return nil
}

func decodeSegment(id, v string) (Segment, error) {
	f := strings.Split(v, recordSep)
	n, err := strconv.ParseInt(id, 10, 64)
	if len(f) != 4 || err != nil {
		return Segment{}, fmt.Errorf("segment %s: unreadable", id)
	}
	return Segment{ID: n, Name: f[0], Expr: f[1], CreatedAt: msTime(f[2]), UpdatedAt: msTime(f[3])}, nil
}

// ListSegments implements Segments.
func (r *Redis) ListSegments(ctx context.Context) ([]Segment, error) {
	all, err := r.rdb.HGetAll(ctx, keySegments).Result()
	if err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	out := make([]Segment, 0, len(all))
	for id, v := range all {
		s, err := decodeSegment(id, v)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Segment) int { return int(a.ID - b.ID) })
	return out, nil
}

// GetSegment implements Segments.
func (r *Redis) GetSegment(ctx context.Context, idOrName string) (Segment, error) {
	id := idOrName
	if _, err := strconv.ParseInt(idOrName, 10, 64); err != nil {
		var gerr error
		if id, gerr = r.rdb.HGet(ctx, keySegmentName, idOrName).Result(); errors.Is(gerr, redis.Nil) {
			return Segment{}, ErrNoSegment
		} else if gerr != nil {
			return Segment{}, fmt.Errorf("segment %q: %w", idOrName, gerr)
		}
	}
	v, err := r.rdb.HGet(ctx, keySegments, id).Result()
	if errors.Is(err, redis.Nil) {
		return Segment{}, ErrNoSegment
	}
	if err != nil {
		return Segment{}, fmt.Errorf("segment %q: %w", idOrName, err)
	}
	return decodeSegment(id, v)
}

// CheckSegment implements Segments.
func (r *Redis) CheckSegment(ctx context.Context, expr string) (segment.Expr, error) {
	p, err := r.planSegment(ctx, expr)
	if err != nil {
		return segment.Expr{}, err
	}
	return p.expr, nil
}

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
			sfx = sfxTopic + t.Name
		case segment.Tag:
			sfx = sfxTag + t.Name
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
	}
	return out, nil
}
