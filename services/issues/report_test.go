package issues

import (
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/csvcell"
	"github.com/newsletter/newsletter/store"
)

// TestReportHours: the hours run from the send's start (when it came
// before the first count) or the first counted hour, every hour between
// included, counts in the same hour summed, and nothing past the bound.
func TestReportHours(t *testing.T) {
	at := time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC)
	hours := []store.HourCount{{Hour: at, Clicks: 2}, {Hour: at.Add(10 * time.Minute), Clicks: 1}, {Hour: at.Add(2 * time.Hour), MachineClicks: 4}}
	got := reportHours(time.Time{}, hours, time.Hour, maxReportHours)
	if len(got) != 3 || !got[0].Hour.Equal(at.Truncate(time.Hour)) || got[0].Clicks != 3 || got[1].Clicks != 0 || got[2].MachineClicks != 4 || got[2].Since != 2 {
		t.Fatalf("from the first count: %+v", got)
	}
	got = reportHours(at.Add(-3*time.Hour), hours, time.Hour, maxReportHours)
	if len(got) != 6 || got[3].Clicks != 3 || got[0].Since != 0 {
		t.Fatalf("from a scheduled start: %+v", got)
	}
	// A start after the first count (a resend's schedule) does not cut it.
	if got = reportHours(at.Add(time.Hour), hours, time.Hour, maxReportHours); len(got) != 3 || got[0].Clicks != 3 {
		t.Fatalf("a later start: %+v", got)
	}
	if got = reportHours(time.Time{}, []store.HourCount{{Hour: at}, {Hour: at.Add(200 * 24 * time.Hour), Clicks: 9}}, time.Hour, maxReportHours); len(got) != maxReportHours {
		t.Fatalf("past the bound: %d hours", len(got))
	}
	if got = reportHours(at, nil, time.Hour, maxReportHours); got == nil || len(got) != 0 {
		t.Fatalf("nothing counted: %#v", got)
	}
	if csvcell.Guard("=1+1") != "'=1+1" || csvcell.Guard("https://x") != "https://x" || csvcell.Guard("") != "" {
		t.Fatal("csvcell.Guard")
	}
}
