package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/topics"
)

// Catalog is what the publisher declares at run time: the topics and the
// onboarding sequence (one document, Version counting its saves) and the
// mail templates written in the console (each with its own version). Gen
// moves on every change of either, so the roles' caches read one number
// to know whether to read the rest.
type Catalog struct {
	Set       topics.Set
	Version   int64 // 0: nothing stored yet
	Gen       int64
	Templates map[string]Template
}

// Template is a mail template's text as stored: Text is the KIND.txt
// (with its {{define "subject"}}), HTML the KIND.html (its {{define
// "body"}}; the layout's HTML is the whole page). Either may be empty:
// the built-in one is used for that part.
type Template struct {
	Name    string `json:"name"`
	Text    string `json:"text"`
	HTML    string `json:"html"`
	Version int64  `json:"version"`
}

// CatalogChange is one saved version: what changed ("topics" or
// "template:NAME"), its version, when, by whom, and the content saved (the
// topics' JSON or the template's), so any version can be read back.
type CatalogChange struct {
	What    string          `json:"what"`
	Version int64           `json:"version"`
	At      time.Time       `json:"at"`
	Actor   string          `json:"actor"`
	Content json.RawMessage `json:"content"`
}

// maxCatalogHistory is how many saved versions the history keeps (all
// kinds together): enough to undo a day's edits; the audit log keeps
// who changed what for longer.
const maxCatalogHistory = 200

// ErrCatalogStale is a save over a version that is no longer the stored
// one: someone saved in between; nothing was written.
var ErrCatalogStale = errors.New("changed since you read it; read it again")

// ErrCatalogMoved is a save whose own version is current but that was
// checked against a catalog another save changed since (a template
// against an older sequence, or the reverse): check again and retry.
var ErrCatalogMoved = errors.New("the catalog changed while this was checked")

// Saved is what a save stored: the part's new version and the catalog's
// new generation.
type Saved struct{ Version, Gen int64 }

// CatalogStore keeps the catalog.
type CatalogStore interface {
	// Catalog is the stored catalog (Version 0 and no topics when nothing
	// was imported yet).
	Catalog(ctx context.Context) (Catalog, error)
	// CatalogGen is the catalog's generation: one small read.
	CatalogGen(ctx context.Context) (int64, error)
	// ImportCatalog stores set and templates as the first version when
	// nothing is stored yet, and reports whether it did (false: another
	// role or an earlier start did; the stored catalog stands).
	ImportCatalog(ctx context.Context, set topics.Set, templates []Template, actor string) (bool, error)
	// SaveTopics replaces the topics and sequence when version is still
	// the stored one and gen the catalog's generation, and answers the new
	// version and generation. ErrCatalogStale: the version is another;
	// ErrCatalogMoved: the version is, but another part of the catalog
	// changed since gen (what the save was checked against). Nothing is
	// written then.
	SaveTopics(ctx context.Context, set topics.Set, version, gen int64, actor string) (Saved, error)
	// SaveTemplate replaces template t.Name as SaveTopics does, over its
	// own version (0: none stored).
	SaveTemplate(ctx context.Context, t Template, version, gen int64, actor string) (Saved, error)
	// CatalogHistory are the saved versions of what ("topics" or
	// "template:NAME"), newest first, at most limit.
	CatalogHistory(ctx context.Context, what string, limit int) ([]CatalogChange, error)
}

// The fields of keyCatalog.
const (
	catalogVersion = "v"
	catalogDoc     = "doc"
	catalogGen     = "gen"
	catalogTmpl    = "t:"  // + name: the template's JSON
	catalogTmplVer = "tv:" // + name: its version
)

// Catalog implements CatalogStore.
func (r *Redis) Catalog(ctx context.Context) (Catalog, error) {
	h, err := r.rdb.HGetAll(ctx, keyCatalog).Result()
	if err != nil {
		return Catalog{}, wrapErr("read the topics", err)
	}
	c := Catalog{Templates: map[string]Template{}}
	if len(h) == 0 {
		return c, nil
	}
	if c.Version, err = strconv.ParseInt(h[catalogVersion], 10, 64); err != nil {
		return Catalog{}, fmt.Errorf("the stored topics (%s) have a bad version %q", keyCatalog, h[catalogVersion])
	}
	c.Gen, _ = strconv.ParseInt(h[catalogGen], 10, 64) // absent: 0, a cache reads it again
	if err := json.Unmarshal([]byte(h[catalogDoc]), &c.Set); err != nil {
		return Catalog{}, fmt.Errorf("the stored topics (%s) are unreadable: %w", keyCatalog, err)
	}
	for f, v := range h {
		name, ok := strings.CutPrefix(f, catalogTmpl)
		if !ok {
			continue
		}
		var t Template
		if err := json.Unmarshal([]byte(v), &t); err != nil {
			return Catalog{}, fmt.Errorf("the stored template %s is unreadable: %w", name, err)
		}
		t.Name = name
		t.Version, _ = strconv.ParseInt(h[catalogTmplVer+name], 10, 64)
		c.Templates[name] = t
	}
	return c, nil
}

// CatalogGen implements CatalogStore.
func (r *Redis) CatalogGen(ctx context.Context) (int64, error) {
	g, err := r.rdb.HGet(ctx, keyCatalog, catalogGen).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return g, wrapErr("read the topics' generation", err)
}

// importCatalogScript stores the first catalog, unless one is stored.
//
//	KEYS[1] keyCatalog
//	KEYS[2] keyCatalogHistory
//	ARGV[1] the topics' JSON
//	ARGV[2] the history entry's JSON
//	ARGV[3..] pairs: template name, template JSON
//
// Returns 1 when it stored, 0 when a catalog was there.
var importCatalogScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], 'v') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'v', 1, 'doc', ARGV[1])
for i = 3, #ARGV, 2 do
  redis.call('HSET', KEYS[1], 't:' .. ARGV[i], ARGV[i + 1], 'tv:' .. ARGV[i], 1)
end
redis.call('HINCRBY', KEYS[1], 'gen', 1)
redis.call('LPUSH', KEYS[2], ARGV[2])
return 1
`)

// ImportCatalog implements CatalogStore.
func (r *Redis) ImportCatalog(ctx context.Context, set topics.Set, templates []Template, actor string) (bool, error) {
	doc, err := json.Marshal(set)
	if err != nil {
		return false, err
	}
	entry, err := changeEntry("topics", 1, actor, doc)
	if err != nil {
		return false, err
	}
	args := []any{doc, entry}
	for _, t := range templates {
		b, err := json.Marshal(Template{Name: t.Name, Text: t.Text, HTML: t.HTML})
		if err != nil {
			return false, err
		}
		args = append(args, t.Name, b)
	}
	n, err := importCatalogScript.Run(ctx, r.rdb, []string{keyCatalog, keyCatalogHistory}, args...).Int64()
	return n == 1, wrapErr("import the topics", err)
}

// saveCatalogScript writes one part of the catalog when its version is
// the one the writer read, moves the generation and keeps the version in
// the history.
//
//	KEYS[1] keyCatalog
//	KEYS[2] keyCatalogHistory
//	ARGV[1] the version field ("v" or "tv:NAME")
//	ARGV[2] the content field ("doc" or "t:NAME")
//	ARGV[3] the version the writer read (0: none)
//	ARGV[4] the content
//	ARGV[5] the history entry's JSON, with "version":0 for this script to fill in
//	ARGV[6] how many entries the history keeps
//	ARGV[7] the generation the save was checked against
//
// Returns {new version, new generation}, {-1, gen} when the stored
// version is another, {-2, gen} when the generation moved.
var saveCatalogScript = redis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local gen = tonumber(redis.call('HGET', KEYS[1], 'gen') or '0')
if cur ~= tonumber(ARGV[3]) then return {-1, gen} end
if gen ~= tonumber(ARGV[7]) then return {-2, gen} end
local v = cur + 1
redis.call('HSET', KEYS[1], ARGV[1], v, ARGV[2], ARGV[4])
gen = redis.call('HINCRBY', KEYS[1], 'gen', 1)
redis.call('LPUSH', KEYS[2], (string.gsub(ARGV[5], '"version":0', '"version":' .. v, 1)))
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[6]) - 1)
return {v, gen}
`)

// SaveTopics implements CatalogStore.
func (r *Redis) SaveTopics(ctx context.Context, set topics.Set, version, gen int64, actor string) (Saved, error) {
	doc, err := json.Marshal(set)
	if err != nil {
		return Saved{}, err
	}
	return r.saveCatalog(ctx, "topics", catalogVersion, catalogDoc, version, gen, doc, actor)
}

// SaveTemplate implements CatalogStore.
func (r *Redis) SaveTemplate(ctx context.Context, t Template, version, gen int64, actor string) (Saved, error) {
	doc, err := json.Marshal(Template{Name: t.Name, Text: t.Text, HTML: t.HTML})
	if err != nil {
		return Saved{}, err
	}
	return r.saveCatalog(ctx, "template:"+t.Name, catalogTmplVer+t.Name, catalogTmpl+t.Name, version, gen, doc, actor)
}

func (r *Redis) saveCatalog(ctx context.Context, what, versionField, docField string, version, gen int64, doc []byte, actor string) (Saved, error) {
	entry, err := changeEntry(what, 0, actor, doc)
	if err != nil {
		return Saved{}, err
	}
	res, err := saveCatalogScript.Run(ctx, r.rdb, []string{keyCatalog, keyCatalogHistory},
		versionField, docField, version, doc, entry, maxCatalogHistory, gen).Int64Slice()
	if err != nil {
		return Saved{}, wrapErr("save "+what, err)
	}
	if len(res) != 2 {
		return Saved{}, fmt.Errorf("save %s: unexpected answer %v", what, res)
	}
	switch res[0] {
	case -1:
		return Saved{}, fmt.Errorf("%s: %w", what, ErrCatalogStale)
	case -2:
		return Saved{}, fmt.Errorf("%s: %w", what, ErrCatalogMoved)
	}
	return Saved{Version: res[0], Gen: res[1]}, nil
}

// changeEntry is a history entry's JSON. Only "what" (a fixed word or a
// template name) comes before its version, so saveCatalogScript's first
// "version":0 is the entry's own and not the content's.
func changeEntry(what string, version int64, actor string, content []byte) ([]byte, error) {
	return json.Marshal(CatalogChange{What: what, Version: version, At: time.Now().UTC(), Actor: actor, Content: content})
}

// CatalogHistory implements CatalogStore.
func (r *Redis) CatalogHistory(ctx context.Context, what string, limit int) ([]CatalogChange, error) {
	raw, err := r.rdb.LRange(ctx, keyCatalogHistory, 0, -1).Result()
	if err != nil {
		return nil, wrapErr("read the history", err)
	}
	var out []CatalogChange
	for _, s := range raw {
		var c CatalogChange
		if err := json.Unmarshal([]byte(s), &c); err != nil {
			return nil, fmt.Errorf("the history (%s) has an unreadable entry: %w", keyCatalogHistory, err)
		}
		if c.What == what && len(out) < limit {
			out = append(out, c)
		}
	}
	return out, nil
}

// LegacyServiceTopics are the topics a role of a release before the
// catalog recorded (nil when there are none): the first import's topics
// on a Redis such a service ran on.
func (r *Redis) LegacyServiceTopics(ctx context.Context) (*topics.Set, error) {
	b, err := r.rdb.Get(ctx, keyLegacyServiceTopics).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, wrapErr("read the earlier release's topics", err)
	}
	var list []topics.Topic
	if err := json.Unmarshal(b, &list); err != nil || len(list) == 0 {
		return nil, fmt.Errorf("the earlier release's topics (%s) are unreadable: %v", keyLegacyServiceTopics, err)
	}
	return &topics.Set{Topics: list}, nil
}
