package tasks

import (
	"testing"
	"time"

	"github.com/newsletter/newsletter/internal/config"
)

func TestQuietHoursUntil(t *testing.T) {
	w, _ := config.ParseQuietHours("22:00-08:00")
	q := newQuietHours(&w)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	cases := []struct {
		local time.Time
		want  time.Time // zero: not quiet
	}{
		{time.Date(2026, 12, 7, 23, 0, 0, 0, berlin), time.Date(2026, 12, 8, 8, 0, 0, 0, berlin)},
		{time.Date(2026, 12, 7, 3, 30, 0, 0, berlin), time.Date(2026, 12, 7, 8, 0, 0, 0, berlin)},
		{time.Date(2026, 12, 7, 8, 0, 0, 0, berlin), time.Time{}},
		{time.Date(2026, 12, 7, 21, 59, 0, 0, berlin), time.Time{}},
	}
	for _, c := range cases {
		got := q.until("Europe/Berlin", c.local.UTC())
		if !got.Equal(c.want) {
			t.Errorf("at %s: until %s, want %s", c.local, got, c.want)
		}
	}
	if !q.until("", time.Now()).IsZero() || !q.until("Not/AZone", time.Now()).IsZero() {
		t.Fatal("a subscriber without a known zone was held")
	}
	day, _ := config.ParseQuietHours("01:00-05:00")
	if got := newQuietHours(&day).until("UTC", time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)); !got.Equal(time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)) {
		t.Fatalf("non-wrapping window: %s", got)
	}
	if newQuietHours(nil).until("UTC", time.Now()) != (time.Time{}) {
		t.Fatal("no window configured, still held")
	}
}
