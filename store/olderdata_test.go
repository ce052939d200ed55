package store

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// olderRun writes period's run as a version before the digest went out as
// an issue did: startRunScript's fields without as_issue, the latest run.
func olderRun(t *testing.T, rdb *redis.Client, period, state string, created time.Time, planned int64) {
	t.Helper()
	ctx := context.Background()
	err := rdb.HSet(ctx, prefixRun+period, "items", "", "created", strconv.FormatInt(created.UnixMilli(), 10),
		"audience", planned, "cursor", planned, "planned", planned, "state", state).Err()
	if err == nil && state == RunPlanned {
		err = rdb.HSet(ctx, prefixRun+period, "planned_at", strconv.FormatInt(created.UnixMilli(), 10)).Err()
	}
	if err == nil {
		err = rdb.Set(ctx, keyLatestRun, period, 0).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestOlderDigestRuns: a run an older version began (no as_issue) is
// under way while it plans or while fewer of its recipients are counted
// than were planned; counted all, empty, begun by this version, or last
// heard of longer ago than its counters are kept, it is not.
func TestOlderDigestRuns(t *testing.T) {
	ctx := context.Background()
	rdb, _ := redistest.New(t, redistest.DBStore)
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	s := NewRedis(rdb).WithClock(func() time.Time { return now })
	check := func(what string, want ...string) {
		t.Helper()
		got, err := s.OlderDigestRuns(ctx)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: %q %v, want %q", what, got, err, want)
		}
	}
	check("no run yet")

	olderRun(t, rdb, "2026-W49", RunPlanning, now.Add(-time.Hour), 200)
	check("planning", "2026-W49")
	olderRun(t, rdb, "2026-W49", RunPlanned, now.Add(-time.Hour), 3)
	check("planned, nobody counted", "2026-W49")
	// Two sent (their marks), one skipped: all three counted.
	for _, id := range []int64{1, 2} {
		rdb.SetBit(ctx, prefixSent+DigestMarkKind+":2026-W49", id, 1)
	}
	if err := s.SetOutcome(ctx, "2026-W49", OutcomeSkipped, 3); err != nil {
		t.Fatal(err)
	}
	check("planned, every recipient counted")

	olderRun(t, rdb, "2026-W50", RunEmpty, now, 0)
	check("empty")
	olderRun(t, rdb, "2026-W51", RunPlanned, now.Add(-sharedSentTTL-time.Hour), 5)
	check("planned longer ago than its counters are kept")
	olderRun(t, rdb, "2026-W51", RunPlanning, now.Add(-sharedSentTTL-time.Hour), 5)
	check("begun longer ago than its counters are kept")

	// A run this version begins has as_issue, and is never the older
	// path's, however far its issue got.
	if _, err := s.AddItem(ctx, Item{Title: "T", URL: "https://x/t"}); err != nil {
		t.Fatal(err)
	}
	if _, created, err := s.StartDigestRun(ctx, "2026-W52"); err != nil || !created {
		t.Fatal(created, err)
	}
	check("a run of this version, planning")
}
