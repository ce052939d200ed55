package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/topics"
	"github.com/newsletter/newsletter/services/catalog"
	"github.com/newsletter/newsletter/store"
)

func open(t *testing.T, st *store.Redis, first *topics.Set) *catalog.Live {
	t.Helper()
	l, err := catalog.Open(context.Background(), st, catalog.Options{First: first})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ImportFirst(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestOneCatalogForEveryProcess: the first process imports its set; a
// second one started with another keeps the stored one; a save in one is
// in effect there at once and in the other at its refresh, with the
// change hooks called; with Redis gone, both go on with what they have.
func TestOneCatalogForEveryProcess(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	st := store.NewRedis(rdb)
	ctx := context.Background()

	withFile := topics.Default(time.Minute)
	withFile.Topics = append(withFile.Topics, topics.Topic{ID: "essays", Name: "Essays"})
	one := open(t, st, withFile)
	two := open(t, st, topics.Default(time.Minute)) // no file: must not fall back to the built-in ones
	if _, ok := two.Current().Topic("essays"); !ok {
		t.Fatal("a process without the file has other topics than the one that imported it")
	}

	changed := 0
	two.OnChange(func(catalog.Snapshot) { changed++ })
	if changed != 1 {
		t.Fatalf("a hook was called %d times when registered, want once (with the catalog in effect)", changed)
	}
	changed = 0
	next := *one.Current()
	next.Topics = append(append([]topics.Topic(nil), next.Topics...), topics.Topic{ID: "launches", Name: "Launches"})
	if _, err := one.SaveTopics(ctx, next, one.Snapshot().Version, "test"); err != nil {
		t.Fatal(err)
	}
	if _, ok := one.Current().Topic("launches"); !ok {
		t.Fatal("the saving process does not have its change")
	}
	if err := two.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := two.Current().Topic("launches"); !ok || changed != 1 {
		t.Fatalf("after a refresh: launches %v, hooks called %d times, want 1", ok, changed)
	}
	if err := two.Refresh(ctx); err != nil || changed != 1 {
		t.Fatalf("a refresh without a change called the hooks (%d) or failed: %v", changed, err)
	}

	// A stale save and a bad one change nothing.
	if _, err := two.SaveTopics(ctx, next, 1, "test"); !errors.Is(err, catalog.ErrStale) {
		t.Fatalf("a save over version 1: %v, want ErrStale", err)
	}
	bad := *one.Current()
	bad.Topics = bad.Topics[:2]
	var refused *catalog.Error
	if _, err := one.SaveTopics(ctx, bad, one.Snapshot().Version, "test"); !errors.As(err, &refused) {
		t.Fatalf("dropping topics: %v, want a *catalog.Error", err)
	}
	if c, err := st.Catalog(ctx); err != nil || c.Version != 2 {
		t.Fatalf("stored version %d (%v), want 2", c.Version, err)
	}

	mr.Close()
	if err := two.Refresh(ctx); err == nil {
		t.Fatal("a refresh with Redis gone did not fail")
	}
	if _, ok := two.Current().Topic("launches"); !ok {
		t.Fatal("with Redis gone, the process lost the catalog it had")
	}
}
