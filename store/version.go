package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Layout is the key layout this code reads and writes (keys.go), recorded
// in keySchema. Older layouts are refused at start (CheckVersion): the
// code that moved layouts 2 and 3 into this one is gone from the tree.
const Layout = 4

// UpgradeFrom is the release that brings data in an older layout (2 or 3,
// as upgradeFromLayout1 left it) up to this one: the last commit with the
// upgrade code. Its start-up, and its `newsletter migrate` (which checks
// the source the same way before it copies), move the data into layout 4
// before they go on; this version then reads it.
const UpgradeFrom = "d127c22"

// upgradeFromLayout1 is the release that brought layout-1 data up to
// layout 2 and ran the back-fills whose markers are minimumMarkers: data
// from before it goes through it first, then through UpgradeFrom.
const upgradeFromLayout1 = "dbb0319"

// minimumMarkers are the keys that data in this layout holds besides
// keySchema: one per back-fill upgradeFromLayout1 completed, carried
// through UpgradeFrom's move. An empty Redis is stamped with them too, so
// UpgradeFrom, should an operator go back to it, reads the data as
// complete; data without them is refused as older.
var minimumMarkers = []string{keySuppFilled, keyTopicsFilled, keyStatusFilled}

// The data CheckVersion refuses, for errors.Is; the error's text says
// which data it found and what to do.
var (
	ErrDataTooOld = errors.New("data older than this version reads")
	ErrDataTooNew = errors.New("data newer than this version reads")
)

// versionError is a refusal: one line for the operator, and the kind.
type versionError struct {
	kind error
	msg  string
}

func (e *versionError) Error() string { return e.msg }
func (e *versionError) Unwrap() error { return e.kind }

// tooOld is the refusal of data in layout 2 or 3, with the upgrade path.
func tooOld(found string) error {
	return &versionError{ErrDataTooOld, fmt.Sprintf("%s, older than this version reads (layout %d): "+
		"start any role of the release of commit %s once, or run its newsletter migrate (either moves the data into layout %d before it goes on), then stop it and start this one",
		found, Layout, UpgradeFrom, Layout)}
}

// tooOldForUpgradeFrom is the refusal of data older than UpgradeFrom
// reads (layout 1, or layout 2 without its back-fills): two releases to
// go through, in turn.
func tooOldForUpgradeFrom(found string) error {
	return &versionError{ErrDataTooOld, fmt.Sprintf("%s, older than this version reads (layout %d): "+
		"start any role of the release of commit %s once (it brings the data to layout 2 with the suppression lists, topics and status bitmaps filled), "+
		"then any role of the release of commit %s once (it moves it into layout %d), then stop it and start this one",
		found, Layout, upgradeFromLayout1, UpgradeFrom, Layout)}
}

// checkVersionScript reads what CheckVersion judges in one go, and stamps
// an empty Redis with this layout in the same script, so no other writer
// comes between finding it empty and stamping it.
//
//	KEYS[1]     keySchema
//	KEYS[2]     v3Seq         (present once any subscriber was written, up to layout 3)
//	KEYS[3..4]  v1EmailIndex, v1Active
//	KEYS[5..]   minimumMarkers
//	ARGV[1]     Layout
//
// Answers {'stamped'}, or {the layout version (empty for none), how many
// layout-1 keys exist, the missing markers, comma-separated}.
var checkVersionScript = redis.NewScript(`
local schema = redis.call('GET', KEYS[1])
local seq = redis.call('EXISTS', KEYS[2])
local v1 = redis.call('EXISTS', KEYS[3], KEYS[4])
if not schema and seq == 0 and v1 == 0 then
  redis.call('SET', KEYS[1], ARGV[1])
  for i = 5, #KEYS do redis.call('SET', KEYS[i], '1') end
  return {'stamped'}
end
local missing = {}
for i = 5, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then missing[#missing + 1] = KEYS[i] end
end
return {schema or '', tostring(v1), table.concat(missing, ',')}
`)

// CheckVersion is the start-up check every role runs before it serves: it
// reads a few keys, never a subscriber. An empty Redis (no subscriber
// written, no layout-1 key, no layout version) is stamped with the
// layout, markers included, so this version and UpgradeFrom both read it
// as complete; data in this layout goes on; older or newer data is
// refused with an error (ErrDataTooOld, ErrDataTooNew) whose text is the
// one-line way out. Stop the roles of an older version before starting
// this one: whatever they write is not checked again.
//
// Once the layout is right, the search index is filled for the
// subscribers written before it (fillSearch, once).
func (r *Redis) CheckVersion(ctx context.Context, log *slog.Logger) error {
	if err := r.checkLayout(ctx, log); err != nil {
		return err
	}
	return r.fillSearch(ctx, log)
}

// checkLayout is CheckVersion's check of the layout: it stamps an empty
// Redis and refuses any layout but this one.
func (r *Redis) checkLayout(ctx context.Context, log *slog.Logger) error {
	if _, ok := r.rdb.(*redis.ClusterClient); ok {
		// A Redis Cluster only ever holds data in this layout (older
		// data lived on one Redis): its version alone tells, or an
		// empty cluster is stamped (the keys the script below reads sit
		// in slots of their own, which one script cannot read).
		if v, err := r.rdb.Get(ctx, keySchema).Result(); err == nil && v == strconv.Itoa(Layout) {
			return nil
		} else if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("read the data version: %w", err)
		}
		stamped, err := r.rdb.SetNX(ctx, keySchema, Layout, 0).Result()
		if err != nil {
			return fmt.Errorf("record the data version: %w", err)
		}
		if stamped {
			log.Info("store: empty Redis Cluster, recorded the data version", "layout", Layout)
			return nil
		}
		v, err := r.rdb.Get(ctx, keySchema).Result()
		if err != nil {
			return fmt.Errorf("read the data version: %w", err)
		}
		if n, err := strconv.Atoi(v); err == nil && n >= 2 && n < Layout {
			return tooOld(fmt.Sprintf("a Redis Cluster holds data in layout %d, which only ever lived on one Redis", n))
		}
		return judgeVersion(v, false, "")
	}
	keys := append([]string{keySchema, v3Seq, v1EmailIndex, v1Active}, minimumMarkers...)
	res, err := checkVersionScript.Run(ctx, r.rdb, keys, Layout).StringSlice()
	if err != nil {
		return fmt.Errorf("read the data version: %w", err)
	}
	if len(res) == 1 && res[0] == "stamped" {
		log.Info("store: empty Redis, recorded the data version", "layout", Layout)
		return nil
	}
	if len(res) != 3 {
		return fmt.Errorf("read the data version: unexpected answer %q", res)
	}
	return judgeVersion(res[0], res[1] != "0", res[2])
}

// judgeVersion decides on what checkVersionScript found in a Redis that
// was not empty: the layout version recorded ("" for none), whether
// layout-1 keys exist and which minimumMarkers are missing. It answers nil
// for data in this layout, and a refusal with the way out for any other.
func judgeVersion(schema string, v1 bool, missing string) error {
	if schema == "" {
		// Not empty (the script stamps an empty Redis), and every
		// release since layout 2 records the version at start, before
		// it writes anything: data without it was written by layout 1.
		return tooOldForUpgradeFrom("the data is in layout 1 (no layout version in " + keySchema + ")")
	}
	n, err := strconv.Atoi(schema)
	if err != nil || n < 1 {
		return &versionError{ErrDataTooNew, fmt.Sprintf("%s holds %q, a layout no release of this service wrote (this version reads layout %d): "+
			"check that NEWSLETTER_REDIS_URL names this service's Redis and database", keySchema, schema, Layout)}
	}
	if n > Layout {
		return &versionError{ErrDataTooNew, fmt.Sprintf("the data is in layout %d, newer than this version reads (layout %d): "+
			"run the release that wrote it, or a later one", n, Layout)}
	}
	if n < 2 {
		return tooOldForUpgradeFrom(fmt.Sprintf("the data is in layout %d", n))
	}
	if v1 {
		// upgradeFromLayout1 moves layout-1 data only while no layout
		// version is recorded: a layout-1 role that wrote after the
		// migration left data it would not move on its own.
		return &versionError{ErrDataTooOld, fmt.Sprintf("layout-1 keys (%s, %s) are beside layout %d, written by a role of a layout-1 version after the migration: "+
			"stop it, delete %s, start any role of the release of commit %s once to move them, then any role of the release of commit %s once, then stop that and start this one",
			v1EmailIndex, v1Active, n, keySchema, upgradeFromLayout1, UpgradeFrom)}
	}
	if missing != "" {
		return tooOldForUpgradeFrom(fmt.Sprintf("the data is in layout %d without its back-fills done (no %s)", n, strings.ReplaceAll(missing, ",", ", ")))
	}
	if n < Layout {
		return tooOld(fmt.Sprintf("the data is in layout %d", n))
	}
	return nil
}

// UpgradedKeys is how many keys this process's start-up moved into a
// newer layout (newsletter_store_upgraded_keys_total). Start-up no longer
// moves any (older layouts are refused, CheckVersion): it is always 0, and
// the metric stays for the dashboards and alerts that read it.
func UpgradedKeys() int64 { return 0 }
