package store

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// testdata/v2-content.json is layout 2 as the release before layout 3
// wrote it (commit 7718591, through its store's methods; README.md):
// three subscribers, an issue edited once and scheduled, the digest's
// issue of run 2026-W49, an item, a feed's state, a stored token and a
// webhook endpoint. Start-up moves it to layout 3, and every method
// reads back what the old store wrote.
func TestUpgradeFromLayout2(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	loadFixture(t, rdb, "testdata/v2-content.json")
	s := NewRedis(rdb)
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	checkV2Content(t, s)
	if n := oldNames(t, rdb); len(n) > 0 {
		t.Errorf("layout-2 names left after the upgrade: %v", n)
	}
	before := dumpAll(t, rdb)
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	if after := dumpAll(t, rdb); !maps.Equal(before, after) {
		t.Error("a second start-up changed the upgraded data")
	}
}

// An upgrade stopped half way (a crash) is finished by the next start-up:
// the keys it renamed stay, the others follow.
func TestUpgradeFromLayout2Resumes(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	ctx := context.Background()
	loadFixture(t, rdb, "testdata/v2-content.json")
	for _, p := range layout3Keys[:len(layout3Keys)/2] {
		if err := renameScript.Run(ctx, rdb, []string{p[0], p[1]}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Rename(ctx, "nl:issue:1", prefixIssue+"1").Err(); err != nil {
		t.Fatal(err)
	}
	s := NewRedis(rdb)
	if err := s.CheckVersion(ctx, quietLog); err != nil {
		t.Fatal(err)
	}
	checkV2Content(t, s)
	if n := oldNames(t, rdb); len(n) > 0 {
		t.Errorf("layout-2 names left after the upgrade: %v", n)
	}
}

// oldNames are the keys under a name layout 3 renamed.
func oldNames(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	var out []string
	for k := range dumpAll(t, rdb) {
		for _, p := range layout3Keys {
			if k == p[0] {
				out = append(out, k)
			}
		}
	keys:
		for _, f := range layout3Prefixes {
			if !strings.HasPrefix(k, f.old) {
				continue
			}
			for _, s := range f.skip {
				if strings.HasPrefix(k, s) {
					continue keys
				}
			}
			out = append(out, k)
		}
	}
	return out
}

// checkV2Content reads the fixture's content through the store.
func checkV2Content(t *testing.T, s *Redis) {
	t.Helper()
	ctx := context.Background()
	is, err := s.Issue(ctx, 1)
	if err != nil || is.Subject != "First, again" || is.Status != "scheduled" || is.Slug != "first" {
		t.Fatalf("issue 1: %+v %v", is, err)
	}
	if vs, err := s.IssueVersions(ctx, 1); err != nil || len(vs) != 1 || vs[0].Subject != "First" {
		t.Errorf("issue 1's versions: %+v %v", vs, err)
	}
	if bySlug, err := s.IssueBySlug(ctx, "first"); err != nil || bySlug.ID != 1 {
		t.Errorf("issue by slug: %+v %v", bySlug, err)
	}
	if list, err := s.ListIssues(ctx, "", 0, 10); err != nil || len(list) != 2 {
		t.Errorf("issues: %d %v, want 2", len(list), err)
	}
	run, err := s.DigestRun(ctx, "2026-W49")
	if err != nil || run.Issue != 2 || len(run.Items) != 1 {
		t.Errorf("digest run: %+v %v", run, err)
	}
	if p, err := s.LatestDigestPeriod(ctx); err != nil || p != "2026-W49" {
		t.Errorf("latest run %q %v", p, err)
	}
	if items, err := s.ItemsAfter(ctx, "", 0, 10); err != nil || len(items) != 1 || items[0].Title != "An item" {
		t.Errorf("items: %+v %v", items, err)
	}
	if fs, err := s.FeedState(ctx, "digest", "https://example.com/feed.xml"); err != nil || fs.ETag != `"etag1"` {
		t.Errorf("feed state: %+v %v", fs, err)
	}
	if p, err := s.LookupToken(ctx, "hash-of-a-token"); err != nil || p.Name != "ci" {
		t.Errorf("token: %+v %v", p, err)
	}
	if whs, err := s.ListWebhooks(ctx); err != nil || len(whs) != 1 || whs[0].ID != "wh1" {
		t.Errorf("webhooks: %+v %v", whs, err)
	}
	due, err := s.OutboxDue(ctx, time.UnixMilli(1900000000000), 10)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, e := range due {
		ids[e.ID] = true
	}
	for _, want := range []string{"o0", "o1", "o2", "issueplan:1:1"} {
		if !ids[want] {
			t.Errorf("outbox entry %s missing from %v", want, ids)
		}
	}
	if sub, err := s.Get(ctx, "ann@example.com"); err != nil || sub.Status != Active {
		t.Errorf("ann: %+v %v", sub, err)
	}
}
