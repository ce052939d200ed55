package store

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The search index finds people by the beginning of their address or of
// their name (or of any word of it). Each shard keeps its own (sfxSearch,
// in the shard's slot, so the scripts that write a person keep it in the
// same step: save() in scripts.go); a search reads the 64 indexes side by
// side in one round trip (ZRANGEBYLEX, pipelined) and merges them. Keys
// are lowercased the way Lua's string.lower does, ASCII only: a name
// with "É" is found by "é" only as typed.

// MaxSearchQuery is the longest search prefix taken.
const MaxSearchQuery = 200

// SearchQuery asks for one page of the people whose address or name
// begins with Q, in the index's order (by the key that matched).
type SearchQuery struct {
	Q      string
	Status Status // "" for any
	Topic  string // "" for any
	// After and Before are cursors of an earlier page (SearchPage.Next,
	// SearchPage.Prev); at most one is given.
	After, Before string
	Limit         int // 1..MaxSubscriberPage
}

// SearchPage is one page of a search.
type SearchPage struct {
	Subscribers []Subscriber
	// Total is how many index entries match Q: a person found both by
	// their address and by a word of their name is listed once but
	// counted per entry. -1 when a status or topic narrows the search
	// (that count would need every match read).
	Total int64
	// Next and Prev are the cursors of the pages after and before; ""
	// when there is none.
	Next, Prev string
}

// searchPrefix is q as the index keeps keys: trimmed, ASCII lowercased.
func searchPrefix(q string) string { return lowerASCII(strings.TrimSpace(q)) }

func lowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// searchKeys are the keys a person is found by: the address, the whole
// name, its words between spaces and their parts between punctuation
// (searchkeys in the scripts' prelude says the same: Lua's %s and %p, in
// the C locale, are ASCII space and punctuation).
func searchKeys(email, name string) []string {
	var out []string
	add := func(k string) {
		if k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	add(lowerASCII(email))
	n := lowerASCII(name)
	add(n)
	for _, w := range strings.FieldsFunc(n, func(r rune) bool { return strings.ContainsRune(" \t\n\v\f\r", r) }) {
		add(w)
		for _, x := range strings.FieldsFunc(w, func(r rune) bool {
			return strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", r)
		}) {
			add(x)
		}
	}
	return out
}

// firstMatch is the smallest of a person's keys that begins with p: the
// entry a search lists them at (their other entries are skipped, so a
// person is on one page once).
func firstMatch(sub Subscriber, p string) string {
	best := ""
	for _, k := range searchKeys(sub.Email, sub.Name) {
		if strings.HasPrefix(k, p) && (best == "" || k < best) {
			best = k
		}
	}
	return best
}

// splitMember reads an index member: key NUL id.
func splitMember(m string) (key string, id int64, ok bool) {
	i := strings.LastIndexByte(m, 0)
	if i < 0 {
		return "", 0, false
	}
	id, err := strconv.ParseInt(m[i+1:], 10, 64)
	return m[:i], id, err == nil && id > 0
}

// Search finds people by the beginning of their address or name (see
// SearchQuery). A query without a prefix, with a cursor that is not one
// of its own, or with a bad status, topic or limit: ErrBadQuery.
func (r *Redis) Search(ctx context.Context, q SearchQuery) (SearchPage, error) {
	return r.search(ctx, q, true)
}

// search is Search, with the total counted or not (Select walks a whole
// selection and needs no total per page).
func (r *Redis) search(ctx context.Context, q SearchQuery, counted bool) (SearchPage, error) {
	p := searchPrefix(q.Q)
	if err := r.checkSearch(q, p); err != nil {
		return SearchPage{}, err
	}
	back := q.Before != ""
	hits, err := r.searchHits(ctx, q, p, back)
	if err != nil {
		return SearchPage{}, err
	}
	page := searchPageOf(q, hits, back)
	if counted && q.Status == "" && q.Topic == "" {
		n, err := r.searchCount(ctx, p)
		if err != nil {
			return SearchPage{}, err
		}
		page.Total = n
	}
	return page, nil
}

// checkSearch refuses a query search cannot answer (ErrBadQuery); p is
// its prefix as the index keeps it (searchPrefix).
func (r *Redis) checkSearch(q SearchQuery, p string) error {
	switch {
	case p == "" || len(p) > MaxSearchQuery:
		return fmt.Errorf("%w: a search needs 1 to %d characters", ErrBadQuery, MaxSearchQuery)
	case q.Limit < 1 || q.Limit > MaxSubscriberPage:
		return fmt.Errorf("%w: limit %d (want 1..%d)", ErrBadQuery, q.Limit, MaxSubscriberPage)
	case q.After != "" && q.Before != "":
		return fmt.Errorf("%w: after or before, not both", ErrBadQuery)
	case q.Status != "" && !q.Status.Valid():
		return fmt.Errorf("%w: unknown status %q", ErrBadQuery, q.Status)
	case q.Topic != "" && !slices.Contains(r.tl().ids, q.Topic):
		return fmt.Errorf("%w: unknown topic %q", ErrBadQuery, q.Topic)
	}
	for _, c := range []string{q.After, q.Before} {
		if k, _, ok := splitMember(c); c != "" && (!ok || !strings.HasPrefix(k, p)) {
			return fmt.Errorf("%w: the cursor is not one of this search's", ErrBadQuery)
		}
	}
	return nil
}

// searchHit is one person a search found, under the index member that
// found them (the page's cursors).
type searchHit struct {
	member string
	sub    Subscriber
}

// searchHits walks the index from the query's cursor (backwards: back)
// and answers the people who match, limit+1 at most: the one past the
// page tells there is another.
func (r *Redis) searchHits(ctx context.Context, q SearchQuery, p string, back bool) ([]searchHit, error) {
	// Bounds of the walk: [p … (p\xff holds every key beginning with p
	// (UTF-8 has no byte 0xff).
	lo, hi := "["+p, "("+p+"\xff"
	if q.After != "" {
		lo = "(" + q.After
	}
	if back {
		hi = "(" + q.Before
	}
	keep := func(sub Subscriber) bool {
		return (q.Status == "" || sub.Status == q.Status) && (q.Topic == "" || slices.Contains(sub.Topics, q.Topic))
	}
	var hits []searchHit
	want := q.Limit + 1
	for len(hits) < want {
		members, more, err := r.searchRange(ctx, lo, hi, want, back)
		if err != nil {
			return nil, err
		}
		if len(members) == 0 {
			break
		}
		ids := make([]int64, len(members))
		for i, m := range members {
			_, ids[i], _ = splitMember(m)
		}
		subs, err := r.SubscribersByID(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		for i, m := range members {
			key, _, _ := splitMember(m)
			// An id erased or renamed between the two reads matches
			// none of its keys here: skipped.
			if subs[i].ID != 0 && firstMatch(subs[i], p) == key && keep(subs[i]) {
				hits = append(hits, searchHit{m, subs[i]})
				if len(hits) == want {
					break
				}
			}
		}
		if !more {
			break
		}
		last := members[len(members)-1]
		if back {
			hi = "(" + last
		} else {
			lo = "(" + last
		}
	}
	return hits, nil
}

// searchPageOf is the page of hits (limit+1 at most, in walk order) with
// its cursors; its Total is left unknown (-1).
func searchPageOf(q SearchQuery, hits []searchHit, back bool) SearchPage {
	extra := len(hits) > q.Limit
	hits = hits[:min(len(hits), q.Limit)]
	if back {
		slices.Reverse(hits)
	}
	page := SearchPage{Subscribers: make([]Subscriber, len(hits)), Total: -1}
	for i, h := range hits {
		page.Subscribers[i] = h.sub
	}
	switch {
	case len(hits) == 0 && back:
		page.Next = q.Before
	case len(hits) == 0:
		page.Prev = q.After
	case back:
		page.Next = hits[len(hits)-1].member
		if extra {
			page.Prev = hits[0].member
		}
	default:
		if q.After != "" {
			page.Prev = hits[0].member
		}
		if extra {
			page.Next = hits[len(hits)-1].member
		}
	}
	return page
}

// searchRange reads up to n members between lo and hi (ZRANGEBYLEX
// bounds) from every shard's index in one round trip and merges them:
// the first n of all (the last n, backwards). more: some shard may hold
// more past them.
func (r *Redis) searchRange(ctx context.Context, lo, hi string, n int, back bool) ([]string, bool, error) {
	cmds := make([]*redis.StringSliceCmd, Shards)
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range everyShard() {
			by := &redis.ZRangeBy{Min: lo, Max: hi, Count: int64(n)}
			if back {
				cmds[i] = p.ZRevRangeByLex(ctx, s.key(sfxSearch), by)
			} else {
				cmds[i] = p.ZRangeByLex(ctx, s.key(sfxSearch), by)
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("search the index: %w", err)
	}
	var all []string
	more := false
	for _, c := range cmds {
		all = append(all, c.Val()...)
		more = more || len(c.Val()) == n
	}
	slices.Sort(all)
	if back {
		slices.Reverse(all)
	}
	if len(all) > n {
		all, more = all[:n], true
	}
	return all, more, nil
}

// searchCount sums every shard's entries beginning with p (ZLEXCOUNT),
// in one round trip.
func (r *Redis) searchCount(ctx context.Context, p string) (int64, error) {
	cmds := make([]*redis.IntCmd, Shards)
	_, err := r.rdb.Pipelined(ctx, func(pp redis.Pipeliner) error {
		for i, s := range everyShard() {
			cmds[i] = pp.ZLexCount(ctx, s.key(sfxSearch), "["+p, "("+p+"\xff")
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count the search's matches: %w", err)
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}

// fillSearchScript puts one record bucket's subscribers in the shard's
// search index (fillSearch): ZADD of what save() would have added, so
// running it again, or beside the scripts that keep the index, changes
// nothing.
//
//	KEYS[1]  the shard's anchor
//	ARGV[1]  the bucket (idSlot / subsPerBucket)
//
// Answers how many records it read.
var fillSearchScript = subscriberScript(`
local recs = redis.call('HGETALL', SUBS .. ARGV[1])
for i = 1, #recs, 2 do
  local r = unpackrec(recs[i + 1])
  searchset(recs[i], r[5], r[6], true)
end
return #recs / 2
`)

// fillSearch puts the subscribers written before the search index (by a
// release without it, or moved into shards by UpgradeFrom) in it, once: keySearchFilled
// records that it is done. It runs at start-up after the version check;
// it can be stopped at any point and run again (every step is
// idempotent), and two roles running it at once only do the work twice.
// Until it is done a search may miss the people from before.
func (r *Redis) fillSearch(ctx context.Context, log *slog.Logger) error {
	done, err := r.rdb.Exists(ctx, keySearchFilled).Result()
	if err != nil {
		return fmt.Errorf("search index: read its marker: %w", err)
	}
	if done == 1 {
		return nil
	}
	seqs := make([]*redis.StringCmd, Shards)
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range everyShard() {
			seqs[i] = p.Get(ctx, s.key(sfxSeq))
		}
		return nil
	})
	if err := pipeErr(nil, err); err != nil {
		return fmt.Errorf("search index: read the shards' counters: %w", err)
	}
	var records int64
	for i, s := range everyShard() {
		n, _ := seqs[i].Int64() // no counter: nobody in the shard
		// The shard's n ids are slots 1..n; an id from before the
		// shards (moved by UpgradeFrom) may sit higher: its bucket is
		// read too since that move set the counter past it.
		for b := int64(0); b <= n/subsPerBucket; b++ {
			got, err := fillSearchScript.Run(ctx, r.rdb, []string{anchor(s)}, b).Int64()
			if err != nil {
				return fmt.Errorf("search index: shard %d bucket %d: %w", s, b, err)
			}
			records += got
		}
	}
	if err := r.rdb.Set(ctx, keySearchFilled, "1", 0).Err(); err != nil {
		return fmt.Errorf("search index: record it done: %w", err)
	}
	if records > 0 {
		log.Info("store: put the subscribers in the search index", "subscribers", records)
	}
	return nil
}
