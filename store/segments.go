package store

import (
	"context"
	"errors"
	"fmt"
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
