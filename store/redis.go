package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/topics"
)

// Redis is the Store on a Redis server (or miniredis). Every state change is
// one Lua script, above the method that runs it (the preludes they share
// are in scripts.go); the keys are laid out in keys.go.
type Redis struct {
	rdb    redis.UniversalClient
	now    func() time.Time
	topics *liveTopics
	// erasure is the keyed hash of an erased address (WithErasure).
	erasure func(email string) string
	// countTimeout bounds a segment count (WithSegmentCountTimeout).
	countTimeout time.Duration
	// added are the channels added through the seam (WithChannels): a
	// person may choose them beside AllChannels.
	added []string
}

// topicList is the topics file as the scripts take it.
type topicList struct {
	ids      []string
	all      string // every id, comma-separated
	defaults string // the default ids, comma-separated
}

func newTopicList(s *topics.Set) topicList {
	return topicList{ids: s.IDs(), all: strings.Join(s.IDs(), ","), defaults: strings.Join(s.Defaults(), ",")}
}

// liveTopics follows a topics.Source (the catalog, which the console
// changes at run time): the list is made again only when the set in
// effect is another.
type liveTopics struct {
	src  topics.Source
	last atomic.Pointer[madeTopicList]
}

type madeTopicList struct {
	from *topics.Set
	list topicList
}

func (l *liveTopics) list() topicList {
	set := l.src.Current()
	if m := l.last.Load(); m != nil && m.from == set {
		return m.list
	}
	m := &madeTopicList{from: set, list: newTopicList(set)}
	l.last.Store(m)
	return m.list
}

// tl is the topics in effect as the scripts take them.
func (r *Redis) tl() topicList { return r.topics.list() }

// NewRedis returns the store on rdb, with the built-in topics. It does not
// close rdb.
func NewRedis(rdb redis.UniversalClient) *Redis {
	return &Redis{rdb: rdb, now: time.Now, topics: &liveTopics{src: topics.Default(0)}, erasure: defaultErasureHash}
}

// WithClock returns the store reading the time from now (for tests).
func (r *Redis) WithClock(now func() time.Time) *Redis {
	c := *r
	c.now = now
	return &c
}

// WithTopics returns the store reading and writing the topics s has in
// effect at each call.
func (r *Redis) WithTopics(s topics.Source) *Redis {
	if topics.Missing(s) {
		return r
	}
	c := *r
	c.topics = &liveTopics{src: s}
	return &c
}

// WithChannels is r with the channels added through the seam (their
// names; tasks.AddedChannels), which people's choices may then name.
func (r *Redis) WithChannels(names ...string) *Redis {
	c := *r
	c.added = slices.Clone(names)
	return &c
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func msTime(s string) time.Time { return unixMilli(s, 10) }

// withDay is the KEYS of a subscriber script that counts: the anchor and
// the shard's counters of today.
func (r *Redis) withDay(a string, s shard) []string { return []string{a, r.dayKey(s)} }

// withDayLeftBy is withDay with the shard's bitmap of those who left
// through issue's links (issue 0: withDay).
func (r *Redis) withDayLeftBy(issue int64) func(a string, s shard) []string {
	if issue <= 0 {
		return r.withDay
	}
	return func(a string, s shard) []string {
		return []string{a, r.dayKey(s), leftByKey(s, issue)}
	}
}

// anchorOnly is the KEYS of a subscriber script that takes no other.
func anchorOnly(a string, _ shard) []string { return []string{a} }

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Ping implements Subscribers.
func (r *Redis) Ping(ctx context.Context) error {
	return r.rdb.Ping(ctx).Err()
}

var _ Store = (*Redis)(nil)

// pipeErr is a pipeline's first error other than redis.Nil: a missing key
// is an answer, not a failure.
func pipeErr(cmds []redis.Cmder, err error) error {
	if err == nil {
		return nil
	}
	for _, c := range cmds {
		if e := c.Err(); e != nil && !errors.Is(e, redis.Nil) {
			return e
		}
	}
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}
