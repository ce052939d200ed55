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
// in keySchema. Start-up brings layout 2 and 3 data (at the minimum
// below) up to it (upgrade.go, upgrade4.go).
const Layout = 4

// minLayout is the oldest layout start-up upgrades.
const minLayout = 2

// The minimum data version this code reads: layout 2 with what later
// versions keep beside it filled for the subscribers from before them,
// the suppression lists (keySuppFilled), the topics (keyTopicsFilled) and
// the status bitmaps (keyStatusFilled). It is what UpgradeFrom leaves
// once any of its roles has started: its start-up moved layout-1 data to
// layout 2 and then ran the three back-fills, each recording its marker
// when done, and returned an error (so the role did not run) unless all
// of them were done. Code that only older data needed (the layout-1
// migration, the lookup that moved a layout-1 subscriber on a miss, the
// back-fills) is gone: older data is refused at start (CheckVersion).
//
// UpgradeFrom is the release that brings any older data to the minimum:
// the last one with that code.
const UpgradeFrom = "dbb0319"

// minimumMarkers are the keys that data at the minimum holds besides
// keySchema: one per back-fill UpgradeFrom completed.
var minimumMarkers = []string{keySuppFilled, keyTopicsFilled, keyStatusFilled}

// What layout 1 kept (one hash per subscriber, nl:sub:<id>, beside
// these): none of it is read any more, but its presence means data
// older than the minimum, or a role of a layout-1 version still writing.
const (
	v1EmailIndex = "nl:email"  // hash email -> id
	v1Active     = "nl:active" // zset of active ids
)

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

// tooOld is the refusal of data below the minimum, with the upgrade path.
func tooOld(found string) error {
	return &versionError{ErrDataTooOld, fmt.Sprintf("%s, older than this version reads (layout %d with the suppression lists, topics and status bitmaps filled): "+
		"start any role of the release of commit %s once (it brings the data up before it serves), then stop it and start this one", found, minLayout, UpgradeFrom)}
}

// checkVersionScript reads what CheckVersion judges in one go, and stamps
// an empty Redis with the minimum in the same script, so no other writer
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
// minimum, markers included, so this version and UpgradeFrom both read it
// as complete; data at the minimum goes on; older or newer data is
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

// checkLayout is CheckVersion's check of the layout and its upgrades.
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
		_, err = judgeVersion(v, false, "")
		if err == nil {
			err = tooOld(fmt.Sprintf("a Redis Cluster holds data in layout %s, which only ever lived on one Redis", v))
		}
		return err
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
	from, err := judgeVersion(res[0], res[1] != "0", res[2])
	if err != nil || from == Layout {
		return err
	}
	if from < 3 {
		if _, err := r.upgradeTo3(ctx, log); err != nil {
			return err
		}
	}
	_, err = r.upgradeTo4(ctx, log)
	return err
}

// judgeVersion decides on what checkVersionScript found in a Redis that
// was not empty: the layout version recorded ("" for none), whether
// layout-1 keys exist and which minimumMarkers are missing. It answers the
// data's layout when this code reads it (Layout) or upgrades it.
func judgeVersion(schema string, v1 bool, missing string) (int, error) {
	if schema == "" {
		// Not empty (the script stamps an empty Redis), and every
		// release since layout 2 records the version at start, before
		// it writes anything: data without it was written by layout 1.
		return 0, tooOld("the data is in layout 1 (no layout version in " + keySchema + ")")
	}
	n, err := strconv.Atoi(schema)
	if err != nil || n < 1 {
		return 0, &versionError{ErrDataTooNew, fmt.Sprintf("%s holds %q, a layout no release of this service wrote (this version reads layout %d): "+
			"check that NEWSLETTER_REDIS_URL names this service's Redis and database", keySchema, schema, Layout)}
	}
	if n > Layout {
		return 0, &versionError{ErrDataTooNew, fmt.Sprintf("the data is in layout %d, newer than this version reads (layout %d): "+
			"run the release that wrote it, or a later one", n, Layout)}
	}
	if n < minLayout {
		return 0, tooOld(fmt.Sprintf("the data is in layout %d", n))
	}
	if v1 {
		// UpgradeFrom moves layout-1 data only while no layout version
		// is recorded: a layout-1 role that wrote after the migration
		// left data it would not move on its own.
		return 0, &versionError{ErrDataTooOld, fmt.Sprintf("layout-1 keys (%s, %s) are beside layout %d, written by a role of a layout-1 version after the migration: "+
			"stop it, delete %s, start any role of the release of commit %s once to move them, then stop that and start this one", v1EmailIndex, v1Active, n, keySchema, UpgradeFrom)}
	}
	if missing != "" {
		return 0, tooOld(fmt.Sprintf("the data is in layout %d without its back-fills done (no %s)", n, strings.ReplaceAll(missing, ",", ", ")))
	}
	return n, nil
}
