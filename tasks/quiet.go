package tasks

import (
	"sync"
	"time"

	"github.com/newsletter/newsletter/internal/config"
)

// quietHours defers bulk mail that would arrive inside a local-time window
// (NEWSLETTER_QUIET_HOURS) in the subscriber's own time zone. Subscribers
// without a time zone are not held: guessing one would be worse.
type quietHours struct {
	window config.QuietHours
	mu     sync.Mutex
	zones  map[string]*time.Location
}

func newQuietHours(w *config.QuietHours) *quietHours {
	if w == nil {
		return nil
	}
	return &quietHours{window: *w, zones: map[string]*time.Location{}}
}

// until returns when the window containing now ends for a subscriber in
// zone, or the zero time when now is outside it.
func (q *quietHours) until(zone string, now time.Time) time.Time {
	if q == nil || zone == "" {
		return time.Time{}
	}
	loc := q.location(zone)
	if loc == nil {
		return time.Time{}
	}
	local := now.In(loc)
	midnight := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc)
	at := local.Sub(midnight)
	start, end := q.window.Start, q.window.End
	switch {
	case start < end && at >= start && at < end: // 01:00-05:00
		return at2(midnight, end)
	case start > end && at >= start: // 22:00-08:00, evening side
		return at2(midnight.AddDate(0, 0, 1), end)
	case start > end && at < end: // 22:00-08:00, morning side
		return at2(midnight, end)
	}
	return time.Time{}
}

// at2 is midnight plus a wall-clock offset, computed on the calendar so a
// daylight-saving change that day does not shift it.
func at2(midnight time.Time, offset time.Duration) time.Time {
	return time.Date(midnight.Year(), midnight.Month(), midnight.Day(),
		int(offset/time.Hour), int(offset%time.Hour/time.Minute), 0, 0, midnight.Location())
}

func (q *quietHours) location(zone string) *time.Location {
	q.mu.Lock()
	defer q.mu.Unlock()
	if loc, ok := q.zones[zone]; ok {
		return loc
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		loc = nil // unknown zone: never held, and remembered so
	}
	q.zones[zone] = loc
	return loc
}
