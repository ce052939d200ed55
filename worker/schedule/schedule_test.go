package schedule

import (
	"testing"
	"time"
)

// TestFeedSlotsAreTheSameOnEveryReplica: the next firing is the start of
// the next slot, whenever a replica started, so replicas meet on one
// TaskID.
func TestFeedSlotsAreTheSameOnEveryReplica(t *testing.T) {
	s := slots(15 * time.Minute)
	for _, c := range []struct{ at, want string }{
		{"10:07:31", "10:15:00"},
		{"10:15:00", "10:30:00"},
		{"10:59:59", "11:00:00"},
	} {
		at, _ := time.Parse(time.TimeOnly, c.at)
		want, _ := time.Parse(time.TimeOnly, c.want)
		if got := s.Next(at); !got.Equal(want) {
			t.Errorf("after %s: %s, want %s", c.at, got.Format(time.TimeOnly), c.want)
		}
	}
}
