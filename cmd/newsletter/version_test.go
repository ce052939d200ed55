package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
)

// TestOlderDataStopsStartUp: a role started on data older than the
// minimum (here what layout 1 left: a subscriber counter, no layout
// version) stops
// before it serves, with one line giving the way to upgrade, and writes
// nothing; on an empty Redis it would have stamped the version.
func TestOlderDataStopsStartUp(t *testing.T) {
	rdb, url := redistest.Own(t, redistest.DBCommand)
	ctx := context.Background()
	if err := rdb.Set(ctx, "nl:seq", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	env := realEnv(url, "smtp://127.0.0.1:1?tls=none", nil)
	var out, errb bytes.Buffer
	code := run(ctx, []string{"worker"}, func(k string) string { return env[k] }, &out, &errb)
	want := "newsletter worker: redis layout: the data is in layout 1"
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	last := lines[len(lines)-1]
	if code != 1 || !strings.HasPrefix(last, want) || !strings.Contains(last, "release of commit "+store.UpgradeFrom+" once") {
		t.Fatalf("start-up on layout-1 data: exit %d, stderr:\n%s\nwant exit 1 and a last line starting %q naming %s", code, errb.String(), want, store.UpgradeFrom)
	}
	if n, err := rdb.Exists(ctx, "nl:schema").Result(); err != nil || n != 0 {
		t.Fatalf("the refused start-up recorded a layout version: %d %v", n, err)
	}
}

// versionedStore is the store of a test that writes to Redis itself,
// often before any role has started on it: it records the data version
// first, as a role's start does on an empty Redis, so the roles the test
// starts then do not take its subscribers for an older version's data.
func versionedStore(t testing.TB, rdb *redis.Client) *store.Redis {
	t.Helper()
	st := store.NewRedis(rdb)
	if err := st.CheckVersion(context.Background(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return st
}
