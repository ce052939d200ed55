package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// A fixture (testdata/README.md) is a Redis database written by an older
// store through its own methods, read back key by key.
type fixtureKey struct {
	Key    string            `json:"key"`
	Type   string            `json:"type"`
	String string            `json:"string"`
	Bytes  []byte            `json:"bytes"` // a string that may not be text (a bitmap)
	Hash   map[string]string `json:"hash"`
	ZSet   map[string]int64  `json:"zset"`
	List   []string          `json:"list"`
	Set    []string          `json:"set"`
	TTL    int64             `json:"ttl_ms"`
}

func loadFixture(t *testing.T, rdb *redis.Client, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var keys []fixtureKey
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range keys {
		var err error
		switch k.Type {
		case "string":
			v := k.String
			if k.Bytes != nil {
				v = string(k.Bytes)
			}
			err = rdb.Set(ctx, k.Key, v, 0).Err()
		case "hash":
			err = rdb.HSet(ctx, k.Key, k.Hash).Err()
		case "zset":
			var zs []redis.Z
			for m, s := range k.ZSet {
				zs = append(zs, redis.Z{Member: m, Score: float64(s)})
			}
			err = rdb.ZAdd(ctx, k.Key, zs...).Err()
		case "list":
			err = rdb.RPush(ctx, k.Key, anys(k.List)...).Err()
		case "set":
			err = rdb.SAdd(ctx, k.Key, anys(k.Set)...).Err()
		default:
			err = fmt.Errorf("fixture key %s of type %s", k.Key, k.Type)
		}
		if err == nil && k.TTL > 0 {
			err = rdb.PExpire(ctx, k.Key, time.Duration(k.TTL)*time.Millisecond).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// refused checks that CheckVersion refuses the data as kind, with a
// one-line message holding every one of want, and writes nothing.
func refused(t *testing.T, rdb *redis.Client, kind error, want ...string) {
	t.Helper()
	before := dumpAll(t, rdb)
	err := NewRedis(rdb).CheckVersion(context.Background(), quietLog)
	if !errors.Is(err, kind) {
		t.Fatalf("CheckVersion: %v, want %v", err, kind)
	}
	msg := err.Error()
	t.Logf("refused: %s", msg)
	if strings.Contains(msg, "\n") {
		t.Errorf("the message is more than one line: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the message %q does not say %q", msg, w)
		}
	}
	if after := dumpAll(t, rdb); !maps.Equal(before, after) {
		t.Errorf("a refusal wrote to Redis:\nbefore %v\nafter  %v", before, after)
	}
}

// An empty Redis is stamped with this layout, the markers of the minimum
// included; stamped, it goes on.
func TestCheckVersionStampsEmptyRedis(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	s := NewRedis(rdb)
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	if v, err := rdb.Get(ctx, keySchema).Result(); err != nil || v != strconv.Itoa(Layout) {
		t.Fatalf("layout version %q %v, want %d", v, err, Layout)
	}
	for _, k := range minimumMarkers {
		if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 1 {
			t.Fatalf("marker %s not set: %d %v", k, n, err)
		}
	}
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatalf("stamped, checked again: %v", err)
	}
}

// Data in this layout goes on, and the check writes nothing: no
// per-subscriber work at start.
func TestCheckVersionCurrentGoesOn(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	s := NewRedis(rdb)
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Subscribe(ctx, SubscribeRequest{Email: fmt.Sprintf("r%d@x.io", i), Activate: i > 0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.MarkBounced(ctx, "r2@x.io"); err != nil {
		t.Fatal(err)
	}
	before := dumpAll(t, rdb)
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatalf("layout %d refused: %v", Layout, err)
	}
	if after := dumpAll(t, rdb); !maps.Equal(before, after) {
		t.Fatalf("the check wrote to Redis:\nbefore %v\nafter  %v", before, after)
	}
}

// Layout-1 data (testdata/v1-layout.json) is refused with the upgrade
// path, and a lookup no longer moves a layout-1 subscriber: it is not
// found, and its keys stay as they were.
func TestCheckVersionRefusesLayout1(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	loadFixture(t, rdb, "testdata/v1-layout.json")
	refused(t, rdb, ErrDataTooOld, "layout 1", "layout 2",
		"start any role of the release of commit "+upgradeFromLayout1+" once", "then any role of the release of commit "+UpgradeFrom+" once", "then stop it and start this one")

	before := dumpAll(t, rdb)
	if _, err := NewRedis(rdb).Get(ctx, "ann@example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a layout-1 subscriber looked up: %v, want not found", err)
	}
	if after := dumpAll(t, rdb); !maps.Equal(before, after) {
		t.Fatal("a lookup wrote to Redis")
	}
}

func TestCheckVersionRefusesOlder(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, rdb *redis.Client)
		want  []string
	}{
		{"layout-1 index only", func(t *testing.T, rdb *redis.Client) {
			if err := rdb.HSet(ctx, v1EmailIndex, "ann@example.com", "1").Err(); err != nil {
				t.Fatal(err)
			}
		}, []string{"layout 1", UpgradeFrom}},
		{"layout version 1", func(t *testing.T, rdb *redis.Client) {
			if err := rdb.MSet(ctx, keySchema, "1", v3Seq, "4").Err(); err != nil {
				t.Fatal(err)
			}
		}, []string{"layout 1", UpgradeFrom}},
		// testdata/v2-layout.json: layout 2 before topics and the status
		// bitmaps, its suppression lists filled.
		{"layout 2 before the back-fills", func(t *testing.T, rdb *redis.Client) {
			loadFixture(t, rdb, "testdata/v2-layout.json")
		}, []string{"layout 2 without its back-fills done (no " + keyTopicsFilled + ", " + keyStatusFilled + ")", UpgradeFrom}},
		{"layout-1 keys beside layout 2", func(t *testing.T, rdb *redis.Client) {
			if err := NewRedis(rdb).CheckVersion(ctx, quietLog); err != nil {
				t.Fatal(err)
			}
			if err := rdb.ZAdd(ctx, v1Active, redis.Z{Member: "9", Score: 9}).Err(); err != nil {
				t.Fatal(err)
			}
		}, []string{v1Active, "stop it, delete " + keySchema, UpgradeFrom}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rdb, _ := redistest.New(t, redistest.DBStore)
			c.setup(t, rdb)
			refused(t, rdb, ErrDataTooOld, c.want...)
		})
	}
}

// A store holding layout 3 data (one Redis, the subscribers in one
// keyspace, with the markers of the back-fills: what UpgradeFrom moves
// into shards) is refused with the upgrade path in one line; neither the
// check nor a lookup changes a key.
func TestCheckVersionRefusesLayout3(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	// What layout 3 kept of one active subscriber, id 5.
	rec := strings.Join([]string{"a", "1", "1", "", "old@example.org", "Old", ""}, "\x1f")
	p := rdb.Pipeline()
	p.Set(ctx, keySchema, "3", 0)
	for _, k := range minimumMarkers {
		p.Set(ctx, k, "1", 0)
	}
	p.Set(ctx, v3Seq, "5", 0)
	p.HSet(ctx, "nl:s:0", "5", rec)
	p.SetBit(ctx, "nl:act", 5, 1)
	p.SetBit(ctx, "nl:t:digest", 5, 1)
	p.SetBit(ctx, "nl:tknown", 5, 1)
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	refused(t, rdb, ErrDataTooOld, "the data is in layout 3, older than this version reads (layout 4)",
		"start any role of the release of commit "+UpgradeFrom+" once, or run its newsletter migrate", "then stop it and start this one")

	before := dumpAll(t, rdb)
	if _, err := NewRedis(rdb).Get(ctx, "old@example.org"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a layout-3 subscriber looked up: %v, want not found", err)
	}
	if after := dumpAll(t, rdb); !maps.Equal(before, after) {
		t.Fatal("a lookup wrote to Redis")
	}
}

// Layout 2 as its last release left it (testdata/v2-content.json, the
// back-fills done) is refused the same way: UpgradeFrom moves it too.
func TestCheckVersionRefusesLayout2(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	loadFixture(t, rdb, "testdata/v2-content.json")
	refused(t, rdb, ErrDataTooOld, "the data is in layout 2, older than this version reads (layout 4)",
		"start any role of the release of commit "+UpgradeFrom+" once")
}

func TestCheckVersionRefusesNewer(t *testing.T) {
	ctx := context.Background()
	for v, want := range map[string]string{
		"5":  "the data is in layout 5, newer than this version reads (layout 4)",
		"2b": `holds "2b", a layout no release of this service wrote`,
	} {
		t.Run(v, func(t *testing.T) {
			rdb, _ := redistest.New(t, redistest.DBStore)
			if err := rdb.Set(ctx, keySchema, v, 0).Err(); err != nil {
				t.Fatal(err)
			}
			refused(t, rdb, ErrDataTooNew, want)
		})
	}
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
