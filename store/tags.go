package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Tags are labels the publisher puts on people (an import's tags column,
// the API): kept as topics are, one bitmap per tag in each shard, so a
// segment reads them without reading a record, and the person's own list
// beside their record.

// MaxTagLength and MaxTagsPerPerson bound what one person carries: a tag
// is a bitmap in every shard, so the names are short and few.
const (
	MaxTagLength      = 40
	MaxTagsPerPerson  = 50
	maxTagsInRegistry = 10000
)

var tagName = regexp.MustCompile(`^[a-z0-9_-]+$`)

// ErrBadTag: a tag name the store refuses (see CheckTag); nothing changed.
var ErrBadTag = errors.New("bad tag")

// CheckTag tells a valid tag name: 1 to MaxTagLength of a-z, 0-9, - and _.
func CheckTag(name string) error {
	if len(name) == 0 || len(name) > MaxTagLength || !tagName.MatchString(name) {
		return fmt.Errorf("%w %q: 1 to %d of a-z, 0-9, - and _", ErrBadTag, name, MaxTagLength)
	}
	return nil
}

// Tags are the people's tags.
type Tags interface {
	// AddTags gives subscriber id the tags (each CheckTag'd; ErrBadTag
	// otherwise, and more than MaxTagsPerPerson in all too), registers
	// them as known, and answers the person's tags after, sorted. No
	// such id: ErrNotFound.
	AddTags(ctx context.Context, id int64, tags []string) ([]string, error)
	// RemoveTags takes the tags off subscriber id (a tag they do not
	// have is no error) and answers their tags after, sorted.
	RemoveTags(ctx context.Context, id int64, tags []string) ([]string, error)
	// TagsOf reads the tags of many people, lined up with ids (nil for
	// none or an unknown id), one HMGET per record bucket.
	TagsOf(ctx context.Context, ids []int64) ([][]string, error)
	// KnownTags lists every tag ever given, sorted: the console's list
	// and what a segment may name.
	KnownTags(ctx context.Context) ([]string, error)
}

// personExtrasLua is the subscriber prelude's part for tags and fields:
//
//	tagkey(id), fieldkey(id)  the hashes a person's tags and field values are in
//	tagsof(id)                the person's tags, comma-separated ('' for none)
//	JOINDAY                   the shard's first slot of each day (sfxJoinDay)
//	addtags(id, list)         gives the person the tags of a comma-separated list
//	setfields(id, pairs)      merges name, value pairs into the person's field values
//	forgetextras(id)          clears the person's tag bits, tags and field values (erase)
var personExtrasLua = fmt.Sprintf(`
local TAGLIST, TAGBIT, FIELDVALS, JOINDAY = PFX .. %q, PFX .. %q, PFX .. %q, PFX .. %q
local function tagkey(id) return TAGLIST .. math.floor(slot(id) / PER) end
local function fieldkey(id) return FIELDVALS .. math.floor(slot(id) / PER) end
local function tagsof(id) return redis.call('HGET', tagkey(id), id) or '' end
-- addtags gives a person the tags of a comma-separated list.
local function addtags(id, list)
  local have, all = {}, {}
  for t in tagsof(id):gmatch('[^,]+') do have[t] = true end
  for t in list:gmatch('[^,]+') do
    if not have[t] then
      have[t] = true
      redis.call('SETBIT', TAGBIT .. t, slot(id), 1)
    end
  end
  for t in pairs(have) do all[#all + 1] = t end
  table.sort(all)
  if #all > 0 then redis.call('HSET', tagkey(id), id, table.concat(all, ',')) end
end
-- setfields merges name, value pairs (a table of 2n strings; an empty
-- value clears the field) into a person's packed values; answers them.
local function setfields(id, pairs_)
  local cur, names = {}, {}
  local was = redis.call('HGET', fieldkey(id), id)
  if was then
    local parts = {}
    for f in (was .. SEP):gmatch('([^' .. SEP .. ']*)' .. SEP) do parts[#parts + 1] = f end
    for i = 1, #parts - 1, 2 do cur[parts[i]] = parts[i + 1] end
  end
  for i = 1, #pairs_ - 1, 2 do
    if pairs_[i + 1] == '' then cur[pairs_[i]] = nil else cur[pairs_[i]] = pairs_[i + 1] end
  end
  for n in pairs(cur) do names[#names + 1] = n end
  table.sort(names)
  local out = {}
  for _, n in ipairs(names) do out[#out + 1] = n; out[#out + 1] = cur[n] end
  local v = table.concat(out, SEP)
  if #names == 0 then redis.call('HDEL', fieldkey(id), id) else redis.call('HSET', fieldkey(id), id, v) end
  return v
end
local function forgetextras(id)
  for t in tagsof(id):gmatch('[^,]+') do redis.call('SETBIT', TAGBIT .. t, slot(id), 0) end
  redis.call('HDEL', tagkey(id), id)
  redis.call('HDEL', fieldkey(id), id)
end
`, sfxTagList, sfxTag, sfxFieldValues, sfxJoinDay)

// changeTagsScript adds tags to a person or takes them off.
//
//	KEYS[1]  the id's shard's anchor
//	ARGV[1]  id
//	ARGV[2]  'add' or 'remove'
//	ARGV[3]  the most tags a person may have
//	ARGV[4…] the tags
//
// Writes the person's tag list (tagkey) and their bit in each tag's
// bitmap that changed; nothing when the person would have more than
// ARGV[3]. Answers 'ok' and the tags after (comma-separated), 'toomany',
// or 'notfound'.
var changeTagsScript = subscriberScript(`
local id = ARGV[1]
if redis.call('HEXISTS', subkey(id), id) == 0 then return {'notfound'} end
local have, n = {}, 0
for t in tagsof(id):gmatch('[^,]+') do have[t] = true; n = n + 1 end
local add, changed = ARGV[2] == 'add', {}
for i = 4, #ARGV do
  local t = ARGV[i]
  if add and not have[t] then have[t] = true; n = n + 1; changed[#changed + 1] = t
  elseif not add and have[t] then have[t] = nil; n = n - 1; changed[#changed + 1] = t end
end
if n > tonumber(ARGV[3]) then return {'toomany'} end
for _, t in ipairs(changed) do redis.call('SETBIT', TAGBIT .. t, slot(id), add and 1 or 0) end
local list = {}
for t in pairs(have) do list[#list + 1] = t end
table.sort(list)
local v = table.concat(list, ',')
if v == '' then redis.call('HDEL', tagkey(id), id) else redis.call('HSET', tagkey(id), id, v) end
return {'ok', v}
`)

// AddTags implements Tags.
func (r *Redis) AddTags(ctx context.Context, id int64, tags []string) ([]string, error) {
	if err := checkTags(tags); err != nil {
		return nil, fmt.Errorf("tags of %d: %w", id, err)
	}
	if len(tags) == 0 {
		return r.tagsOfOne(ctx, id)
	}
	if n, err := r.rdb.SCard(ctx, keyTags).Result(); err != nil {
		return nil, fmt.Errorf("tags of %d: %w", id, err)
	} else if n >= maxTagsInRegistry {
		known, err := r.rdb.SMIsMember(ctx, keyTags, anySlice(tags)...).Result()
		if err != nil {
			return nil, fmt.Errorf("tags of %d: %w", id, err)
		}
		if slices.Contains(known, false) {
			return nil, fmt.Errorf("%w: there are %d tags already, the most the list keeps", ErrBadTag, n)
		}
	}
	after, err := r.changeTags(ctx, id, "add", tags)
	if err != nil {
		return nil, err
	}
	// Registered once given, unlike Subscribe's: the change above may be
	// refused (no such person, too many tags) and a refused tag is not
	// registered; and the call, which changes nothing the second time,
	// answers the same when made again after a failure here.
	if err := r.registerTags(ctx, tags); err != nil {
		return nil, fmt.Errorf("tags of %d: %w", id, err)
	}
	return after, nil
}

// RemoveTags implements Tags.
func (r *Redis) RemoveTags(ctx context.Context, id int64, tags []string) ([]string, error) {
	if err := checkTags(tags); err != nil {
		return nil, fmt.Errorf("tags of %d: %w", id, err)
	}
	if len(tags) == 0 {
		return r.tagsOfOne(ctx, id)
	}
	return r.changeTags(ctx, id, "remove", tags)
}

func (r *Redis) changeTags(ctx context.Context, id int64, op string, tags []string) ([]string, error) {
	if id <= 0 {
		return nil, ErrNotFound
	}
	args := append([]any{id, op, MaxTagsPerPerson}, anySlice(tags)...)
	res, err := changeTagsScript.Run(ctx, r.rdb, []string{anchor(idShard(id))}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("tags of %d: %w", id, err)
	}
	switch res[0] {
	case "notfound":
		return nil, ErrNotFound
	case "toomany":
		return nil, fmt.Errorf("%w: a person has at most %d tags", ErrBadTag, MaxTagsPerPerson)
	}
	return splitList(res[1]), nil
}

func (r *Redis) tagsOfOne(ctx context.Context, id int64) ([]string, error) {
	if _, err := r.GetByID(ctx, id); err != nil {
		return nil, err
	}
	got, err := r.TagsOf(ctx, []int64{id})
	if err != nil {
		return nil, err
	}
	return got[0], nil
}

func checkTags(tags []string) error {
	if len(tags) > MaxTagsPerPerson {
		return fmt.Errorf("%w: at most %d tags", ErrBadTag, MaxTagsPerPerson)
	}
	for _, t := range tags {
		if err := CheckTag(t); err != nil {
			return err
		}
	}
	return nil
}

// TagsOf implements Tags.
func (r *Redis) TagsOf(ctx context.Context, ids []int64) ([][]string, error) {
	vals, err := r.bucketValues(ctx, sfxTagList, ids)
	if err != nil {
		return nil, fmt.Errorf("read tags: %w", err)
	}
	out := make([][]string, len(ids))
	for i, v := range vals {
		out[i] = splitList(v)
	}
	return out, nil
}

// KnownTags implements Tags.
func (r *Redis) KnownTags(ctx context.Context) ([]string, error) {
	tags, err := r.rdb.SMembers(ctx, keyTags).Result()
	if err != nil {
		return nil, fmt.Errorf("known tags: %w", err)
	}
	slices.Sort(tags)
	return tags, nil
}

// bucketValues reads the values of ids in a packed per-person store (sfx),
// lined up with ids ("" for none): one HMGET per bucket, one round trip.
func (r *Redis) bucketValues(ctx context.Context, sfx string, ids []int64) ([]string, error) {
	type bucket struct {
		fields []string
		at     []int
	}
	buckets := map[string]*bucket{}
	for i, id := range ids {
		if id <= 0 {
			continue
		}
		k := bucketKey(sfx, id)
		b := buckets[k]
		if b == nil {
			b = &bucket{}
			buckets[k] = b
		}
		b.fields, b.at = append(b.fields, strconv.FormatInt(id, 10)), append(b.at, i)
	}
	cmds := map[string]*redis.SliceCmd{}
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, b := range buckets {
			cmds[k] = p.HMGet(ctx, k, b.fields...)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]string, len(ids))
	for k, b := range buckets {
		for j, v := range cmds[k].Val() {
			if s, ok := v.(string); ok {
				out[b.at[j]] = s
			}
		}
	}
	return out, nil
}

// splitList reads a comma-separated list; "" is nil.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
