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
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// testdata/v1-layout.json was written by the store of layout 1 (commit
// 9cdc5ca and before) through its own methods: subscribers in every status,
// one with a quoted, non-ASCII name and an IDN address, 150 active readers,
// a digest run with one sent mark and three outbox entries; then every nl:
// key was read back by type (testdata/README.md).
type fixtureKey struct {
	Key    string            `json:"key"`
	Type   string            `json:"type"`
	String string            `json:"string"`
	Bytes  []byte            `json:"bytes"` // a string that may not be text (a bitmap)
	Hash   map[string]string `json:"hash"`
	ZSet   map[string]int64  `json:"zset"`
}

func loadFixture(t *testing.T, rdb *redis.Client) []fixtureKey {
	return loadFixtureFile(t, rdb, "testdata/v1-layout.json")
}

func loadFixtureFile(t *testing.T, rdb *redis.Client, file string) []fixtureKey {
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
		default:
			err = fmt.Errorf("fixture key %s of type %s", k.Key, k.Type)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// v1Subscribers are the fixture's subscribers as layout 1 held them.
func v1Subscribers(keys []fixtureKey) map[string]Subscriber {
	out := map[string]Subscriber{}
	for _, k := range keys {
		if !strings.HasPrefix(k.Key, v1PrefixSub) {
			continue
		}
		f := k.Hash
		id, _ := strconv.ParseInt(f["id"], 10, 64)
		sub := Subscriber{ID: id, Email: f["e"], Name: f["n"], Timezone: f["tz"], Status: Status(f["s"]),
			CreatedAt: msTime(f["c"]), ConfirmedAt: msTime(f["cf"]), UnsubscribedAt: msTime(f["u"]), Topics: []string{}}
		if sub.Status == Active || sub.Status == Pending {
			// From before topics: the migration gives them the defaults.
			sub.Topics = []string{"digest", "updates"}
		}
		out[f["e"]] = sub
	}
	return out
}

// snapshot reads every nl: key and its value (dumpAll), for comparing
// two states of a database.
func snapshot(t *testing.T, rdb *redis.Client) map[string]string {
	t.Helper()
	out := dumpAll(t, rdb)
	maps.DeleteFunc(out, func(k, _ string) bool { return !strings.HasPrefix(k, "nl:") })
	return out
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestMigrateLayout1(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	fixture := loadFixture(t, rdb)
	want := v1Subscribers(fixture)
	if len(want) != 155 {
		t.Fatalf("the fixture holds %d subscribers, want 155", len(want))
	}
	s := NewRedis(rdb)
	if err := s.Migrate(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	if v, _ := rdb.Get(ctx, keySchema).Result(); v != "2" {
		t.Fatalf("layout version %q after the migration", v)
	}
	if n, _ := rdb.Exists(ctx, v1EmailIndex, v1Active).Result(); n != 0 {
		t.Fatal("layout 1 index or active set left behind")
	}
	if keys, _ := rdb.Keys(ctx, v1PrefixSub+"*").Result(); len(keys) != 0 {
		t.Fatalf("%d layout 1 subscriber hashes left behind", len(keys))
	}
	// Every subscriber reads as it was, by address and by id.
	var active []int64
	for email, w := range want {
		got, err := s.Get(ctx, email)
		if err != nil || !reflect.DeepEqual(got, w) {
			t.Fatalf("%s after the migration:\n got %+v %v\nwant %+v", email, got, err, w)
		}
		if w.Status == Active {
			active = append(active, w.ID)
		}
		byID, err := s.SubscribersByID(ctx, []int64{w.ID})
		if err != nil || !reflect.DeepEqual(byID[0], w) {
			t.Fatalf("%s by id: %+v %v", email, byID, err)
		}
		if one, err := s.GetByID(ctx, w.ID); err != nil || !reflect.DeepEqual(one, w) {
			t.Fatalf("%s by id alone: %+v %v", email, one, err)
		}
	}
	// The keyset walk finds exactly the active ones, in order.
	sort.Slice(active, func(i, j int) bool { return active[i] < active[j] })
	walked := walkAudience(t, s, "", 40)
	if !reflect.DeepEqual(walked, active) {
		t.Fatalf("walked %d active ids, want %d", len(walked), len(active))
	}
	// What did not move stays valid: the run, its sent mark, the outbox.
	run, err := s.DigestRun(ctx, "2026-W48")
	if err != nil || run.Sent != 1 || len(run.Items) != 1 {
		t.Fatalf("digest run after the migration: %+v %v", run, err)
	}
	ann := want["ann@example.com"]
	claims, err := s.ClaimMarks(ctx, "", []Mark{{Kind: "digest", Key: "2026-W48", SubscriberID: ann.ID, Shared: true}}, time.Minute)
	if err != nil || claims[0] != AlreadySent {
		t.Fatalf("ann's digest mark: %v %v", claims, err)
	}
	if due, err := s.OutboxDue(ctx, time.Now().Add(24*365*time.Hour), 10); err != nil || len(due) != 3 {
		t.Fatalf("outbox after the migration: %+v %v", due, err)
	}
	// The state changes work on migrated subscribers, and new ids follow.
	if _, err := s.Subscribe(ctx, SubscribeRequest{Email: "ann@example.com"}); !errors.Is(err, ErrAlreadyActive) {
		t.Fatalf("re-subscribing a migrated active address: %v", err)
	}
	if sub, err := s.Confirm(ctx, "bob@example.com", OutboxEntry{ID: "welcome:bob@example.com", Due: time.Now(), Body: []byte("w")}); err != nil || sub.Status != Active {
		t.Fatalf("confirming a migrated pending address: %+v %v", sub, err)
	}
	fresh, err := s.Subscribe(ctx, SubscribeRequest{Email: "new@example.com"})
	if err != nil || fresh.ID != int64(len(want))+1 {
		t.Fatalf("a new subscriber after the migration: %+v %v", fresh, err)
	}

	// A second run changes nothing.
	migrateAgainChangesNothing(t, rdb, s, keySchema)
}

// walkAudience pages through topic's audience ("" : every active
// subscriber) as the planner does, page ids at a time.
func walkAudience(t *testing.T, s *Redis, topic string, page int) []int64 {
	t.Helper()
	var walked []int64
	for cursor := int64(0); ; {
		ids, err := s.AudienceAfter(context.Background(), topic, cursor, page)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 0 {
			return walked
		}
		walked = append(walked, ids...)
		cursor = ids[len(ids)-1]
	}
}

// migrateAgainChangesNothing deletes the key that records a migration as
// done (so it runs again instead of skipping), migrates, and fails on any
// key that changed.
func migrateAgainChangesNothing(t *testing.T, rdb *redis.Client, s *Redis, done string) {
	t.Helper()
	ctx := context.Background()
	before := snapshot(t, rdb)
	if err := rdb.Del(ctx, done).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, rdb); !reflect.DeepEqual(before, after) {
		for k := range after {
			if before[k] != after[k] {
				t.Errorf("%s changed:\n%s\n%s", k, before[k], after[k])
			}
		}
		t.Fatal("the second run changed the data")
	}
}

// TestLayout1FoundBeforeTheMigration: a subscriber the migration has not
// reached yet is found, and moved, by the first script that looks for it,
// so signups and unsubscribes are right while a migration runs.
func TestLayout1FoundBeforeTheMigration(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	want := v1Subscribers(loadFixture(t, rdb))
	s := NewRedis(rdb)
	carl := want["carl@example.com"]
	got, err := s.Get(ctx, "carl@example.com")
	if err != nil || !reflect.DeepEqual(got, carl) {
		t.Fatalf("before the migration: %+v %v", got, err)
	}
	if n, _ := rdb.Exists(ctx, v1PrefixSub+strconv.FormatInt(carl.ID, 10)).Result(); n != 0 {
		t.Fatal("the subscriber found was not moved")
	}
	// By id too: the links in mails name subscribers by id. (The topics
	// come with the migration's second step; compare the record.)
	ann := want["ann@example.com"]
	byID, err := s.GetByID(ctx, ann.ID)
	if err != nil || byID.Email != ann.Email || byID.Name != ann.Name || byID.Status != ann.Status || !byID.ConfirmedAt.Equal(ann.ConfirmedAt) {
		t.Fatalf("by id before the migration: %+v %v", byID, err)
	}
	if n, _ := rdb.Exists(ctx, v1PrefixSub+strconv.FormatInt(ann.ID, 10)).Result(); n != 0 {
		t.Fatal("the subscriber found by id was not moved")
	}
	if got, err := s.Get(ctx, "ann@example.com"); err != nil || !reflect.DeepEqual(got, byID) {
		t.Fatalf("by address after a move by id: %+v %v", got, err)
	}
	// A signup of a layout-1 address finds it, never makes a second one
	// (Dora bounced: she stays so, and her confirmation is written).
	again, err := s.Subscribe(ctx, SubscribeRequest{Email: "dora@example.com", Outbox: OutboxEntry{ID: "confirm:dora@example.com", Due: time.Now(), Body: []byte("x")}})
	if err != nil || again.ID != want["dora@example.com"].ID || again.Status != Bounced || !again.Reconfirming || again.Name != "Dora" {
		t.Fatalf("re-subscribing a layout-1 address: %+v %v", again, err)
	}
	if err := s.Migrate(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "carl@example.com"); !reflect.DeepEqual(got, carl) {
		t.Fatalf("after the migration: %+v", got)
	}
}

// TestMigrateRefusesLeftovers: layout-1 data it cannot move stops the
// migration with an error, and the layout is not recorded as done.
func TestMigrateRefusesLeftovers(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	// An address in the layout-1 index whose subscriber hash is gone: not
	// movable by id. The migration must say so, not declare itself done.
	if err := rdb.HSet(ctx, v1EmailIndex, "ghost@example.com", "7").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, keySeq, 7, 0).Err(); err != nil {
		t.Fatal(err)
	}
	err := NewRedis(rdb).Migrate(ctx, quietLog)
	if err == nil || !strings.Contains(err.Error(), "layout 1 keys are left") {
		t.Fatalf("leftovers: %v", err)
	}
	if v, _ := rdb.Get(ctx, keySchema).Result(); v != "" {
		t.Fatalf("the layout was recorded as %q with layout-1 data left", v)
	}
}

// TestMigrateFillsSuppressionLists: subscribers a layout-2 store held as
// bounced before the suppression lists existed are put on them once at
// start-up, so GET /api/suppressions shows them too; running it again
// changes nothing.
func TestMigrateFillsSuppressionLists(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	s := NewRedis(rdb)
	if err := s.Migrate(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	var bounced []string
	for i := range 3 {
		email := fmt.Sprintf("old%d@x.io", i)
		if _, err := s.Subscribe(ctx, SubscribeRequest{Email: email, Activate: true}); err != nil {
			t.Fatal(err)
		}
		if i != 1 {
			if err := s.MarkBounced(ctx, email); err != nil {
				t.Fatal(err)
			}
			bounced = append(bounced, email)
		}
	}
	// As an earlier version left it: bounced records, no lists.
	if err := rdb.Del(ctx, prefixSupp+"b", prefixSupp+"c", keySuppFilled).Err(); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Suppressed(ctx, "", 0, 10); len(got) != 0 {
		t.Fatalf("set-up: %+v", got)
	}
	for range 2 {
		if err := s.Migrate(ctx, quietLog); err != nil {
			t.Fatal(err)
		}
		got, err := s.Suppressed(ctx, Bounced, 0, 10)
		if err != nil || len(got) != 2 || got[0].Email != bounced[0] || got[1].Email != bounced[1] {
			t.Fatalf("after the start-up fill: %+v %v", got, err)
		}
	}
}
