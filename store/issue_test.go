package store

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
)

// TestDigestIssueSlug: a digest issue's slug is a slug the archive serves
// (lower case letters, digits and hyphens), whatever the period's name.
func TestDigestIssueSlug(t *testing.T) {
	archive := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,79}$`)
	long := "p234567890123456789012345678901234567890123456789012345678901234" // 64, the longest period
	for period, want := range map[string]string{"2026-W49": "digest-2026-w49", "2026-W49b": "digest-2026-w49b", "test_run.2": "digest-test-run-2", long: "digest-" + long} {
		if got := DigestIssueSlug(period); got != want || !archive.MatchString(got) {
			t.Errorf("period %q: slug %q, want %q", period, got, want)
		}
	}
}

// TestIssueStoredBeforeScheduleFieldsKeepsItsSchedule: an issue stored
// when its schedule lived inside its doc keeps that schedule through its
// first edit (the new doc no longer carries it) and is read with it.
func TestIssueStoredBeforeScheduleFieldsKeepsItsSchedule(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBStore)
	s := NewRedis(rdb)
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 9, 0, 0, 0, time.UTC)
	old, _ := json.Marshal(issueDoc{IssueContent: IssueContent{Subject: "S", Body: "one", Topics: []string{"digest"}}, SendAt: at, LocalTime: ""})
	if err := rdb.HSet(ctx, issueKey(1), "doc", old, "slug", "s", "status", IssueScheduled, "version", 1, "round", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if is, err := s.Issue(ctx, 1); err != nil || !is.SendAt.Equal(at) {
		t.Fatalf("an old issue read: %+v %v, want send_at %v", is, err, at)
	}
	if _, err := s.UpdateIssue(ctx, 1, 1, IssueContent{Subject: "S", Body: "two", Topics: []string{"digest"}}); err != nil {
		t.Fatal(err)
	}
	if is, err := s.Issue(ctx, 1); err != nil || !is.SendAt.Equal(at) || is.Body != "two" {
		t.Fatalf("an old issue after its first edit: %+v %v, want send_at %v", is, err, at)
	}
}
