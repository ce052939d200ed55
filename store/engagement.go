package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Engagement is what an issue's readers did with it, counted in aggregate
// (NEWSLETTER_ENGAGEMENT): how often each link was followed and by how
// many distinct readers, and, when NEWSLETTER_OPENS is on, its opens.
// Machine clicks and opens (link scanners, mail-privacy proxies) are
// counted apart and never as readers.
type Engagement struct {
	Links          []LinkStat `json:"links"`
	Clicks         int64      `json:"clicks"`
	UniqueClickers int64      `json:"unique_clickers"`
	MachineClicks  int64      `json:"machine_clicks"`
	Opens          int64      `json:"opens"`
	UniqueOpeners  int64      `json:"unique_openers"`
	MachineOpens   int64      `json:"machine_opens"`
	// Hours are the counts by hour (UTC), oldest first: the report's chart.
	Hours []HourCount `json:"hours"`
	// Tens are the counts of the first FineHours after each mail by
	// FineBucket (Hour: the bucket's start), oldest first.
	Tens []HourCount `json:"tens"`
}

// LinkStat is one link of an issue, by its index in the issue's body.
type LinkStat struct {
	Index          int    `json:"index"`
	URL            string `json:"url"`
	Clicks         int64  `json:"clicks"`
	UniqueClickers int64  `json:"unique_clickers"`
	MachineClicks  int64  `json:"machine_clicks"`
}

// HourCount is one hour's counts of an issue's engagement.
type HourCount struct {
	Hour          time.Time `json:"hour"`
	Clicks        int64     `json:"clicks"`
	MachineClicks int64     `json:"machine_clicks"`
	Opens         int64     `json:"opens"`
	MachineOpens  int64     `json:"machine_opens"`
}

// EngagementReader gives an issue's counted engagement; an issue nobody
// engaged with has a zero Engagement, not an error.
type EngagementReader interface {
	IssueEngagement(ctx context.Context, issueID int64) (Engagement, error)
}

// The counted redirect's store is what the reports read.
var _ EngagementReader = (*Redis)(nil)

// Engagement is written by the API's counted redirect (internal/engage),
// which gathers the clicks and opens in memory and writes them in batches,
// and read by the issue's report.

// EngagementStore is the store's side of the counted redirect.
type EngagementStore interface {
	EngagementReader
	// SetIssueLinks stores the targets of an issue's links by index (the
	// worker, once per rendering): the redirect sends a reader only to a
	// URL stored here, never to one a link names.
	SetIssueLinks(ctx context.Context, issueID int64, urls []string) error
	// IssueLinks are the stored targets (nil: none stored).
	IssueLinks(ctx context.Context, issueID int64) ([]string, error)
	// EventEngagement is the engagement id a topic event's links are
	// signed and counted under (as an issue's under the issue's id):
	// the same for one event id however often it is asked, and never an
	// issue's. Its links are stored with SetIssueLinks under it.
	EventEngagement(ctx context.Context, eventID string) (int64, error)
	// RecordEngagement adds w's counts and answers what it could not
	// write (to be tried again), with the error; a batch is written
	// whole or not at all.
	RecordEngagement(ctx context.Context, w EngagementWrite) (EngagementWrite, error)
}

// EngagementWrite is one flush of the redirect's buffer.
type EngagementWrite struct {
	Batches []EngagementBatch
	// Clicks are the people's own clicks (NEWSLETTER_ENGAGEMENT=per-person
	// only), kept Keep.
	Clicks []PersonClick
	Keep   time.Duration
}

// Empty tells a write with nothing in it.
func (w EngagementWrite) Empty() bool { return len(w.Batches) == 0 && len(w.Clicks) == 0 }

// EngagementBatch is one issue's counts since the last flush.
type EngagementBatch struct {
	Issue int64
	Links map[int]*LinkCounts
	// Opens and MachineOpens count the pixel's loads; Openers are the
	// keyed hashes of the people who loaded it.
	Opens, MachineOpens int64
	Openers             []string
	// Hours are the counts by hour (unix time / 3600); Hour is unset.
	Hours map[int64]*HourCount
	// Tens are the first FineHours' counts by FineBucket (unix time /
	// its seconds); Hour is unset.
	Tens map[int64]*HourCount
}

// LinkCounts are one link's counts in a batch; Readers are the keyed
// hashes of the people who followed it (never their ids).
type LinkCounts struct {
	Clicks, MachineClicks int64
	Readers               []string
}

// PersonClick is one person's click, kept only with
// NEWSLETTER_ENGAGEMENT=per-person: in their personal data until it
// expires, and erased with them.
type PersonClick struct {
	Subscriber int64     `json:"-"`
	Issue      int64     `json:"issue"`
	Link       int       `json:"link"`
	At         time.Time `json:"at"`
}

// personClicksCap bounds one person's kept clicks.
const personClicksCap = 1000

// pfaddChunk is the most members one PFADD of engageScript takes (Lua's
// unpack has a limit).
const pfaddChunk = 500

// engageScript adds one issue's batch (RecordEngagement).
//
//	KEYS[1]  the issue's counters hash (sfxEngCounts); the other keys are
//	         built from its prefix, all in the issue's slot
//	ARGV     a list of operations, each its letter and arguments:
//	         n FIELD BY     HINCRBY counters FIELD BY
//	         h FIELD BY     HINCRBY hours FIELD BY
//	         u SUFFIX N M…  PFADD the HyperLogLog SUFFIX the N members M…
//
// Answers 1.
var engageScript = redis.NewScript(`
local PFX = string.sub(KEYS[1], 1, #KEYS[1] - ` + strconv.Itoa(len(sfxEngCounts)) + `)
local i = 1
while i <= #ARGV do
  local op = ARGV[i]
  if op == 'n' then
    redis.call('HINCRBY', KEYS[1], ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  elseif op == 'h' then
    redis.call('HINCRBY', PFX .. '` + sfxEngHours + `', ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  elseif op == 'u' then
    local n = tonumber(ARGV[i + 2])
    redis.call('PFADD', PFX .. ARGV[i + 1], unpack(ARGV, i + 3, i + 2 + n))
    i = i + 3 + n
  else
    return redis.error_reply('engagement: unknown operation ' .. tostring(op))
  end
end
return 1
`)

// personClicksScript keeps one person's clicks (per-person mode).
//
//	KEYS[1]  the person's clicks (sfxEngPerson + id, in their shard)
//	ARGV[1]  the oldest time kept (unix ms)
//	ARGV[2]  how long the key lives after this write (ms)
//	ARGV[3…] pairs of score (unix ms) and member
//
// Drops the clicks older than ARGV[1] and those past personClicksCap
// (the oldest). Answers 1.
var personClicksScript = redis.NewScript(`
for i = 3, #ARGV, 2 do redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -` + strconv.Itoa(personClicksCap+1) + `)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// setLinksScript replaces an issue's stored link targets.
//
//	KEYS[1]  the issue's links (sfxEngLinks)
//	ARGV     the targets, by index
var setLinksScript = redis.NewScript(`
redis.call('DEL', KEYS[1])
if #ARGV > 0 then redis.call('RPUSH', KEYS[1], unpack(ARGV)) end
return 1
`)

// SetIssueLinks implements EngagementStore.
func (r *Redis) SetIssueLinks(ctx context.Context, issueID int64, urls []string) error {
	args := make([]any, len(urls))
	for i, u := range urls {
		args[i] = u
	}
	if err := setLinksScript.Run(ctx, r.rdb, []string{engageKey(issueID, sfxEngLinks)}, args...).Err(); err != nil {
		return fmt.Errorf("store the links of issue %d: %w", issueID, err)
	}
	return nil
}

// IssueLinks implements EngagementStore.
func (r *Redis) IssueLinks(ctx context.Context, issueID int64) ([]string, error) {
	urls, err := r.rdb.LRange(ctx, engageKey(issueID, sfxEngLinks), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("the links of issue %d: %w", issueID, err)
	}
	if len(urls) == 0 {
		return nil, nil
	}
	return urls, nil
}

// eventEngagementTTL is how long an event keeps its engagement id for
// the fan-out to find again: longer than the fan-out's 25 retries can
// last. The counts and links under the id are kept as an issue's are.
const eventEngagementTTL = 30 * 24 * time.Hour

// eventEngagementScript gives a topic event its engagement id once.
//
//	KEYS[1]  the event's key (prefixEventEngage + its id)
//	KEYS[2]  keyIssueSeq, the issues' id counter
//	ARGV[1]  how long the event's key is kept (ms)
//
// With the event's key set, writes nothing and answers its id; otherwise
// takes the next issue id (so no issue ever has it, as a digest's issue
// takes its id in digestIssueScript) and keeps it under the event's key.
var eventEngagementScript = redis.NewScript(`
local id = redis.call('GET', KEYS[1])
if id then return tonumber(id) end
id = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], id, 'PX', ARGV[1])
return id
`)

// EventEngagement implements EngagementStore.
func (r *Redis) EventEngagement(ctx context.Context, eventID string) (int64, error) {
	if eventID == "" {
		return 0, errors.New("the engagement id of an event: no event id")
	}
	id, err := eventEngagementScript.Run(ctx, r.rdb, []string{eventEngageKey(eventID), keyIssueSeq}, eventEngagementTTL.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("the engagement id of event %s: %w", eventID, err)
	}
	return id, nil
}

// engageArgs are a batch's operations for engageScript.
func engageArgs(b EngagementBatch) []any {
	var args []any
	n := func(field string, by int64) {
		if by != 0 {
			args = append(args, "n", field, by)
		}
	}
	pfadd := func(sfx string, members []string) {
		for lo := 0; lo < len(members); lo += pfaddChunk {
			chunk := members[lo:min(lo+pfaddChunk, len(members))]
			args = append(args, "u", sfx, len(chunk))
			for _, m := range chunk {
				args = append(args, m)
			}
		}
	}
	var all []string
	for _, i := range slices.Sorted(mapKeys(b.Links)) {
		l := b.Links[i]
		idx := strconv.Itoa(i)
		n("c:"+idx, l.Clicks)
		n("m:"+idx, l.MachineClicks)
		pfadd(linkReadersSfx(i), l.Readers)
		all = append(all, l.Readers...)
	}
	slices.Sort(all)
	pfadd(sfxEngAll, slices.Compact(all))
	n("o", b.Opens)
	n("mo", b.MachineOpens)
	pfadd(sfxEngOpen, b.Openers)
	for _, k := range slices.Sorted(mapKeys(b.Tens)) {
		c, bucket := b.Tens[k], "t"+strconv.FormatInt(k, 10)
		for _, f := range []struct {
			sfx string
			n   int64
		}{{"c", c.Clicks}, {"m", c.MachineClicks}, {"o", c.Opens}, {"mo", c.MachineOpens}} {
			if f.n != 0 {
				args = append(args, "h", bucket+":"+f.sfx, f.n)
			}
		}
	}
	for _, h := range slices.Sorted(mapKeys(b.Hours)) {
		c, hour := b.Hours[h], strconv.FormatInt(h, 10)
		for _, f := range []struct {
			sfx string
			n   int64
		}{{"c", c.Clicks}, {"m", c.MachineClicks}, {"o", c.Opens}, {"mo", c.MachineOpens}} {
			if f.n != 0 {
				args = append(args, "h", hour+":"+f.sfx, f.n)
			}
		}
	}
	return args
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// RecordEngagement implements EngagementStore: every batch and every
// person's clicks one script each, all in one pipeline.
func (r *Redis) RecordEngagement(ctx context.Context, w EngagementWrite) (EngagementWrite, error) {
	if w.Empty() {
		return EngagementWrite{}, nil
	}
	byPerson := map[int64][]PersonClick{}
	var people []int64
	for _, c := range w.Clicks {
		if _, ok := byPerson[c.Subscriber]; !ok {
			people = append(people, c.Subscriber)
		}
		byPerson[c.Subscriber] = append(byPerson[c.Subscriber], c)
	}
	now := r.now()
	batchCmds := make([]*redis.Cmd, len(w.Batches))
	personCmds := make([]*redis.Cmd, len(people))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, b := range w.Batches {
			batchCmds[i] = engageScript.Eval(ctx, p, []string{engageKey(b.Issue, sfxEngCounts)}, engageArgs(b)...)
		}
		for i, id := range people {
			args := []any{ms(now.Add(-w.Keep)), w.Keep.Milliseconds()}
			for _, c := range byPerson[id] {
				args = append(args, c.At.UnixMilli(), personClickMember(c))
			}
			personCmds[i] = personClicksScript.Eval(ctx, p, []string{perPersonKey(sfxEngPerson, id)}, args...)
		}
		return nil
	})
	if err == nil {
		return EngagementWrite{}, nil
	}
	// A script is written only when it answered; one that failed or was
	// never sent (the pipeline failed as a whole) is kept.
	left := EngagementWrite{Keep: w.Keep}
	var first error
	written := func(c *redis.Cmd) bool { return c.Err() == nil && c.Val() != nil }
	for i, c := range batchCmds {
		if !written(c) {
			left.Batches = append(left.Batches, w.Batches[i])
			first = firstErr(first, c.Err())
		}
	}
	for i, c := range personCmds {
		if !written(c) {
			left.Clicks = append(left.Clicks, byPerson[people[i]]...)
			first = firstErr(first, c.Err())
		}
	}
	if first == nil {
		first = err
	}
	return left, fmt.Errorf("record engagement: %w", first)
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// personClickMember is a click's member in the person's zset: the issue,
// the link and the time, so two clicks of one link are two entries.
func personClickMember(c PersonClick) string {
	return strconv.FormatInt(c.Issue, 10) + ":" + strconv.Itoa(c.Link) + ":" + strconv.FormatInt(c.At.UnixMilli(), 10)
}

// personClicks reads the members of personClicksScript's zset.
func personClicks(zs []redis.Z) []PersonClick {
	out := make([]PersonClick, 0, len(zs))
	for _, z := range zs {
		parts := strings.Split(z.Member.(string), ":")
		if len(parts) != 3 {
			continue
		}
		issue, err1 := strconv.ParseInt(parts[0], 10, 64)
		link, err2 := strconv.Atoi(parts[1])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, PersonClick{Issue: issue, Link: link, At: time.UnixMilli(int64(z.Score)).UTC()})
	}
	return out
}

// IssueEngagement implements EngagementReader: the counters, hours and
// links in one round trip, each link's unique count in a second.
func (r *Redis) IssueEngagement(ctx context.Context, issueID int64) (Engagement, error) {
	p := r.rdb.Pipeline()
	counts := p.HGetAll(ctx, engageKey(issueID, sfxEngCounts))
	hours := p.HGetAll(ctx, engageKey(issueID, sfxEngHours))
	all := p.PFCount(ctx, engageKey(issueID, sfxEngAll))
	openers := p.PFCount(ctx, engageKey(issueID, sfxEngOpen))
	links := p.LRange(ctx, engageKey(issueID, sfxEngLinks), 0, -1)
	if err := pipeErr(p.Exec(ctx)); err != nil {
		return Engagement{}, fmt.Errorf("engagement of issue %d: %w", issueID, err)
	}
	out := Engagement{Links: []LinkStat{}, Hours: []HourCount{}, UniqueClickers: all.Val(), UniqueOpeners: openers.Val()}
	stats := map[int]*LinkStat{}
	for i, u := range links.Val() {
		linkStat(stats, i).URL = u
	}
	if err := addEngagementCounts(&out, stats, counts.Val()); err != nil {
		return Engagement{}, fmt.Errorf("engagement of issue %d: %w", issueID, err)
	}
	byHour, byTen, err := engagementHours(hours.Val())
	if err != nil {
		return Engagement{}, fmt.Errorf("engagement of issue %d: %w", issueID, err)
	}
	for _, h := range slices.Sorted(mapKeys(byHour)) {
		out.Hours = append(out.Hours, *byHour[h])
	}
	out.Tens = []HourCount{}
	for _, k := range slices.Sorted(mapKeys(byTen)) {
		out.Tens = append(out.Tens, *byTen[k])
	}
	idx := slices.Sorted(mapKeys(stats))
	if len(idx) > 0 {
		p := r.rdb.Pipeline()
		uniq := make([]*redis.IntCmd, len(idx))
		for k, i := range idx {
			uniq[k] = p.PFCount(ctx, engageKey(issueID, linkReadersSfx(i)))
		}
		if err := pipeErr(p.Exec(ctx)); err != nil {
			return Engagement{}, fmt.Errorf("engagement of issue %d: unique clickers: %w", issueID, err)
		}
		for k, i := range idx {
			s := stats[i]
			s.UniqueClickers = uniq[k].Val()
			out.Links = append(out.Links, *s)
		}
	}
	return out, nil
}

// linkStat is link i's entry of stats, made on first use.
func linkStat(stats map[int]*LinkStat, i int) *LinkStat {
	if s, ok := stats[i]; ok {
		return s
	}
	s := &LinkStat{Index: i}
	stats[i] = s
	return s
}

// addEngagementCounts reads the issue's counters hash (sfxEngCounts) into
// out's totals and each link's entry of stats.
func addEngagementCounts(out *Engagement, stats map[int]*LinkStat, counts map[string]string) error {
	for field, v := range counts {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("counter %s: %w", field, err)
		}
		kind, idx, _ := strings.Cut(field, ":")
		switch kind {
		case "o":
			out.Opens = n
		case "mo":
			out.MachineOpens = n
		case "c", "m":
			i, err := strconv.Atoi(idx)
			if err != nil || i < 0 {
				return fmt.Errorf("counter %s: not a link", field)
			}
			if kind == "c" {
				linkStat(stats, i).Clicks = n
				out.Clicks += n
			} else {
				linkStat(stats, i).MachineClicks = n
				out.MachineClicks += n
			}
		}
	}
	return nil
}

// engagementHours reads the issue's hourly hash (sfxEngHours) by hour,
// and its fields of finer buckets ("t<bucket>:…") by FineBucket.
func engagementHours(hours map[string]string) (byHour, byTen map[int64]*HourCount, err error) {
	byHour, byTen = map[int64]*HourCount{}, map[int64]*HourCount{}
	for field, v := range hours {
		n, err1 := strconv.ParseInt(v, 10, 64)
		h, kind, _ := strings.Cut(field, ":")
		into, width := byHour, int64(3600)
		if rest, fine := strings.CutPrefix(h, "t"); fine {
			h, into, width = rest, byTen, int64(FineBucket/time.Second)
		}
		k, err2 := strconv.ParseInt(h, 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, nil, fmt.Errorf("hour %s: %w", field, err)
		}
		c, ok := into[k]
		if !ok {
			c = &HourCount{Hour: time.Unix(k*width, 0).UTC()}
			into[k] = c
		}
		switch kind {
		case "c":
			c.Clicks = n
		case "m":
			c.MachineClicks = n
		case "o":
			c.Opens = n
		case "mo":
			c.MachineOpens = n
		}
	}
	return byHour, byTen, nil
}
