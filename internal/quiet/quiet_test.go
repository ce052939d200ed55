package quiet

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	w, err := Parse("22:00-08:00")
	if err != nil || w.Start != 22*time.Hour || w.End != 8*time.Hour {
		t.Fatalf("%+v %v", w, err)
	}
	for _, bad := range []string{"", "22:00", "22:00-22:00", "25:00-08:00", "ab-cd"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestUntil(t *testing.T) {
	w, _ := Parse("22:00-08:00")
	q := New(&w)
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
		got := q.Until("Europe/Berlin", c.local.UTC())
		if !got.Equal(c.want) {
			t.Errorf("at %s: until %s, want %s", c.local, got, c.want)
		}
	}
	if !q.Until("", time.Now()).IsZero() || !q.Until("Not/AZone", time.Now()).IsZero() {
		t.Fatal("a subscriber without a known zone was held")
	}
	day, _ := Parse("01:00-05:00")
	if got := New(&day).Until("UTC", time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)); !got.Equal(time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)) {
		t.Fatalf("non-wrapping window: %s", got)
	}
	var none *Hours
	if !none.Until("Europe/Berlin", time.Now()).IsZero() {
		t.Fatal("nil quiet hours held a subscriber")
	}
}
