package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// issueListMaxScan is how many issues a page of a filtered list reads.
const issueListMaxScan = 1000

// issueDoc is the stored content of an issue. Its schedule lives in
// fields of its own beside it (send_at, local_time, sent_at), so a move
// of the status never rewrites the content, and an edit never the
// schedule: neither can overwrite the other. Docs written before that
// carry the schedule inside; it is read from there while the fields are
// missing.
type issueDoc struct {
	IssueContent
	Period    string    `json:"period,omitempty"`
	SendAt    time.Time `json:"send_at,omitzero"`
	LocalTime string    `json:"local_time,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	SentAt    time.Time `json:"sent_at,omitzero"`
}

// newIssueLua is the prelude of the scripts that make an issue, so that a
// digest's issue is written exactly as one CreateIssue makes.
//
//	newissue(key, issues, slugs, id, doc, want)  writes the issue's hash
//	    key (doc, status draft, version 1, round 1), id into issues
//	    (keyIssues) and the slug (want, with -2, -3… until free) into
//	    slugs (keyIssueSlugs); returns the slug
const newIssueLua = `
local function newissue(key, issues, slugs, id, doc, want)
  local slug, n = want, 1
  while redis.call('HSETNX', slugs, slug, id) == 0 do
    n = n + 1
    slug = want .. '-' .. n
  end
  redis.call('HSET', key, 'doc', doc, 'slug', slug, 'status', 'draft', 'version', 1, 'round', 1)
  redis.call('ZADD', issues, id, id)
  return slug
end
`

// createIssueScript stores a new draft under a free slug.
//
//	KEYS[1] the issue's hash   KEYS[2] keyIssues   KEYS[3] keyIssueSlugs
//	ARGV[1] id   ARGV[2] doc (JSON)   ARGV[3] slug wanted
//
// Writes the hash (status draft, version 1), the id into keyIssues, the
// slug (with -2, -3… until free) into keyIssueSlugs (newissue). Returns
// the slug.
var createIssueScript = redis.NewScript(newIssueLua + `
return newissue(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
`)

// digestIssueScript makes a digest run's issue once.
//
//	KEYS[1] the run's hash   KEYS[2] keyIssueSeq   KEYS[3] keyIssues   KEYS[4] keyIssueSlugs
//	ARGV[1] doc (JSON)   ARGV[2] slug wanted   ARGV[3] prefixIssue
//
// With the run's issue field set, writes nothing and returns that id.
// Otherwise takes the next id, writes the issue as createIssueScript does
// and the id into the run's issue field, in one step: a crash can leave
// neither an issue without its run nor a run pointing nowhere. Returns
// the id, or 0 when there is no run.
var digestIssueScript = redis.NewScript(newIssueLua + `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local id = redis.call('HGET', KEYS[1], 'issue')
if id then return tonumber(id) end
id = redis.call('INCR', KEYS[2])
newissue(ARGV[3] .. id, KEYS[3], KEYS[4], id, ARGV[1], ARGV[2])
redis.call('HSET', KEYS[1], 'issue', id)
return id
`)

// updateIssueScript replaces the content of a draft or scheduled issue,
// if it is still the version the caller read (compare-and-set: the new
// doc was made from that version, so a later one would be lost).
//
//	KEYS[1] the issue's hash   KEYS[2] its versions list   KEYS[3] keyIssueSlugs
//	ARGV[1] new doc (JSON)   ARGV[2] the version the caller read
//	ARGV[3] send_at (unix ms, 0: none)   ARGV[4] local_time: the schedule
//	        as read, written only when the hash has no send_at field yet
//	        (an issue stored when the schedule lived in its doc: the new
//	        doc no longer carries it)
//	ARGV[5] MaxIssueVersions
//	ARGV[6] the new slug ("": the issue keeps its own)   ARGV[7] the id
//
// Pushes the old doc on the list (trimmed to the last ARGV[5]: the list
// then holds versions version-len … version-1, which IssueVersions
// numbers by), writes the new one, bumps version. With a new slug, moves
// the issue to it in keyIssueSlugs and frees its old one (a draft or a
// scheduled issue was never in the archive: no public address points at
// the old one).
// Returns "ok", or "none" / "state:<status>" / "stale" / "taken" (the
// slug is another issue's) with nothing written.
var updateIssueScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return 'none' end
if st ~= 'draft' and st ~= 'scheduled' then return 'state:' .. st end
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[2] then return 'stale' end
local old = redis.call('HGET', KEYS[1], 'slug')
local move = ARGV[6] ~= '' and ARGV[6] ~= old
if move then
  local owner = redis.call('HGET', KEYS[3], ARGV[6])
  if owner and owner ~= ARGV[7] then return 'taken' end
end
if redis.call('HEXISTS', KEYS[1], 'send_at') == 0 then
  redis.call('HSET', KEYS[1], 'send_at', ARGV[3], 'local_time', ARGV[4])
end
redis.call('RPUSH', KEYS[2], redis.call('HGET', KEYS[1], 'doc'))
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[5]), -1)
redis.call('HSET', KEYS[1], 'doc', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'version', 1)
if move then
  if old and redis.call('HGET', KEYS[3], old) == ARGV[7] then redis.call('HDEL', KEYS[3], old) end
  redis.call('HSET', KEYS[3], ARGV[6], ARGV[7])
  redis.call('HSET', KEYS[1], 'slug', ARGV[6])
end
return 'ok'
`)

// CreateIssue implements Issues.
func (r *Redis) CreateIssue(ctx context.Context, c IssueContent, slug string) (Issue, error) {
	if slug == "" {
		slug = Slugify(c.Subject)
	}
	id, err := r.rdb.Incr(ctx, keyIssueSeq).Result()
	if err != nil {
		return Issue{}, fmt.Errorf("create issue: %w", err)
	}
	now := r.now().UTC().Truncate(time.Millisecond)
	doc, _ := json.Marshal(issueDoc{IssueContent: c, CreatedAt: now, UpdatedAt: now})
	got, err := createIssueScript.Run(ctx, r.rdb, []string{issueKey(id), keyIssues, keyIssueSlugs}, id, doc, slug).Text()
	if err != nil {
		return Issue{}, fmt.Errorf("create issue: %w", err)
	}
	return Issue{ID: id, Slug: got, IssueContent: c, Status: IssueDraft, Version: 1, Round: 1, CreatedAt: now, UpdatedAt: now}, nil
}

// DigestIssue implements Issues.
func (r *Redis) DigestIssue(ctx context.Context, period string, c IssueContent) (Issue, error) {
	now := r.now().UTC().Truncate(time.Millisecond)
	doc, _ := json.Marshal(issueDoc{IssueContent: c, Period: period, CreatedAt: now, UpdatedAt: now})
	id, err := digestIssueScript.Run(ctx, r.rdb, []string{runKey(period), keyIssueSeq, keyIssues, keyIssueSlugs},
		doc, DigestIssueSlug(period), prefixIssue).Int64()
	if err != nil {
		return Issue{}, fmt.Errorf("digest %s issue: %w", period, err)
	}
	if id == 0 {
		return Issue{}, ErrNoRun
	}
	return r.Issue(ctx, id)
}

// UpdateIssue implements Issues.
func (r *Redis) UpdateIssue(ctx context.Context, id int64, version int, c IssueContent) (Issue, error) {
	return r.UpdateIssueSlug(ctx, id, version, c, "")
}

// UpdateIssueSlug implements Issues. The new doc is made from the issue
// as read here; the script writes it only while the issue still has the
// version the caller read, which is the one read here too or an older.
func (r *Redis) UpdateIssueSlug(ctx context.Context, id int64, version int, c IssueContent, slug string) (Issue, error) {
	if slug != "" && !ValidSlug(slug) {
		return Issue{}, fmt.Errorf("issue %d: slug %q: %w", id, slug, ErrBadSlug)
	}
	is, err := r.Issue(ctx, id)
	if err != nil {
		return Issue{}, err
	}
	if is.Version != version {
		if !Editable(is.Status) {
			return Issue{}, &StateError{ID: id, Status: is.Status}
		}
		return Issue{}, fmt.Errorf("issue %d: %w", id, ErrIssueStale)
	}
	doc := docOf(is)
	doc.IssueContent, doc.UpdatedAt = c, r.now().UTC().Truncate(time.Millisecond)
	b, _ := json.Marshal(doc)
	sendAt := "0"
	if !is.SendAt.IsZero() {
		sendAt = ms(is.SendAt)
	}
	res, err := updateIssueScript.Run(ctx, r.rdb, []string{issueKey(id), issueKey(id) + suffixIssueVers, keyIssueSlugs},
		b, version, sendAt, is.LocalTime, MaxIssueVersions, slug, id).Text()
	if err != nil {
		return Issue{}, fmt.Errorf("update issue %d: %w", id, err)
	}
	if res == "taken" {
		return Issue{}, fmt.Errorf("issue %d: slug %q: %w", id, slug, ErrSlugTaken)
	}
	if err := scriptState(res, id); err != nil {
		return Issue{}, err
	}
	return r.Issue(ctx, id)
}

// docOf is the content part of is, as stored (no schedule: see issueDoc).
func docOf(is Issue) issueDoc {
	return issueDoc{IssueContent: is.IssueContent, Period: is.Period, CreatedAt: is.CreatedAt, UpdatedAt: is.UpdatedAt}
}

func issueFrom(id int64, f map[string]string) (Issue, error) {
	if len(f) == 0 {
		return Issue{}, ErrNoIssue
	}
	var d issueDoc
	if err := json.Unmarshal([]byte(f["doc"]), &d); err != nil {
		return Issue{}, fmt.Errorf("issue %d: unreadable: %w", id, err)
	}
	is := Issue{ID: id, Slug: f["slug"], IssueContent: d.IssueContent, Period: d.Period, Status: f["status"], SendAt: d.SendAt,
		LocalTime: d.LocalTime, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt, SentAt: d.SentAt, PausedFrom: f["paused_from"],
		TrashedFrom: f["trashed_from"]}
	if v, ok := f["trashed_at"]; ok {
		is.TrashedAt = msTime(v)
	}
	if v, ok := f["send_at"]; ok {
		is.SendAt, is.LocalTime = msTime(v), f["local_time"]
	}
	if v, ok := f["sent_at"]; ok {
		is.SentAt = msTime(v)
	}
	if v, ok := f["local_first"]; ok && is.LocalTime != "" {
		is.FirstLocal, is.LastLocal = msTime(v), msTime(f["local_last"])
	}
	is.Version, _ = strconv.Atoi(f["version"])
	is.Round, _ = strconv.Atoi(f["round"])
	if is.Topics == nil {
		is.Topics = []string{}
	}
	return is, nil
}

// Issue implements Issues.
func (r *Redis) Issue(ctx context.Context, id int64) (Issue, error) {
	f, err := r.rdb.HGetAll(ctx, issueKey(id)).Result()
	if err != nil {
		return Issue{}, fmt.Errorf("load issue %d: %w", id, err)
	}
	return issueFrom(id, f)
}

// IssueStatus implements Issues: three fields of the issue's hash, not
// its doc (the body, JSON), which Issue reads and decodes.
func (r *Redis) IssueStatus(ctx context.Context, id int64) (IssueStatus, error) {
	f, err := r.rdb.HMGet(ctx, issueKey(id), "status", "round", "version").Result()
	if err != nil {
		return IssueStatus{}, fmt.Errorf("issue %d status: %w", id, err)
	}
	status, _ := f[0].(string)
	if status == "" {
		return IssueStatus{}, ErrNoIssue
	}
	round, _ := f[1].(string)
	version, _ := f[2].(string)
	st := IssueStatus{Status: status}
	st.Round, _ = strconv.Atoi(round)
	st.Version, _ = strconv.Atoi(version)
	return st, nil
}

// IssueBySlug implements Issues.
func (r *Redis) IssueBySlug(ctx context.Context, slug string) (Issue, error) {
	id, err := r.rdb.HGet(ctx, keyIssueSlugs, slug).Int64()
	if errors.Is(err, redis.Nil) {
		return Issue{}, ErrNoIssue
	}
	if err != nil {
		return Issue{}, fmt.Errorf("issue %q: %w", slug, err)
	}
	return r.Issue(ctx, id)
}

// IssueVersions implements Issues: the version and the list read in one
// transaction, so the numbers match the docs (see updateIssueScript).
func (r *Redis) IssueVersions(ctx context.Context, id int64) ([]IssueVersion, error) {
	var cur *redis.StringCmd
	var list *redis.StringSliceCmd
	if _, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		cur = p.HGet(ctx, issueKey(id), "version")
		list = p.LRange(ctx, issueKey(id)+suffixIssueVers, 0, -1)
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("issue %d versions: %w", id, err)
	}
	if errors.Is(cur.Err(), redis.Nil) {
		return nil, ErrNoIssue
	}
	version, _ := strconv.Atoi(cur.Val())
	docs := list.Val()
	out := make([]IssueVersion, 0, len(docs))
	for i, s := range docs {
		var d issueDoc
		if err := json.Unmarshal([]byte(s), &d); err != nil {
			return nil, fmt.Errorf("issue %d: unreadable version: %w", id, err)
		}
		if d.Topics == nil {
			d.Topics = []string{}
		}
		out = append(out, IssueVersion{Version: version - len(docs) + i, IssueContent: d.IssueContent, SavedAt: d.UpdatedAt})
	}
	return out, nil
}

// ListIssues implements Issues.
func (r *Redis) ListIssues(ctx context.Context, status string, after int64, limit int) ([]Issue, error) {
	return r.listIssues(ctx, after, limit, func(is Issue) bool {
		return is.Status == status || (status == "" && is.Status != IssueTrashed)
	})
}

// SentIssues implements Issues.
func (r *Redis) SentIssues(ctx context.Context, topic string, after int64, limit int) ([]Issue, error) {
	return r.listIssues(ctx, after, limit, func(is Issue) bool {
		return is.Status == IssueSent && (topic == "" || slices.Contains(is.Topics, topic))
	})
}

// listIssues walks the ids newest first below after, a page at a time,
// keeping those keep accepts.
func (r *Redis) listIssues(ctx context.Context, after int64, limit int, keep func(Issue) bool) ([]Issue, error) {
	out := []Issue{}
	max := "+inf"
	if after > 0 {
		max = "(" + strconv.FormatInt(after, 10)
	}
	for len(out) < limit {
		ids, err := r.rdb.ZRevRangeByScore(ctx, keyIssues, &redis.ZRangeBy{Max: max, Min: "-inf", Count: issueListMaxScan}).Result()
		if err != nil {
			return nil, fmt.Errorf("list issues: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		cmds := make([]*redis.MapStringStringCmd, len(ids))
		if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.HGetAll(ctx, issueKeyOf(id))
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("list issues: %w", err)
		}
		for i, c := range cmds {
			id, _ := strconv.ParseInt(ids[i], 10, 64)
			is, err := issueFrom(id, c.Val())
			if errors.Is(err, ErrNoIssue) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if keep(is) {
				if out = append(out, is); len(out) == limit {
					break
				}
			}
		}
		max = "(" + ids[len(ids)-1]
	}
	return out, nil
}
