package store

import (
	"regexp"
	"testing"
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
