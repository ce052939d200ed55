// Package quiet is the quiet-hours window (NEWSLETTER_QUIET_HOURS): a daily
// local-time span in which bulk mail waits, applied in each subscriber's own
// time zone.
package quiet

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Window is a daily local-time span, as offsets from local midnight. It may
// wrap midnight (22:00-08:00).
type Window struct{ Start, End time.Duration }

// Parse reads "22:00-08:00".
func Parse(s string) (Window, error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return Window{}, errors.New("want HH:MM-HH:MM")
	}
	start, err1 := clock(a)
	end, err2 := clock(b)
	if err := errors.Join(err1, err2); err != nil {
		return Window{}, err
	}
	if start == end {
		return Window{}, errors.New("start equals end")
	}
	return Window{Start: start, End: end}, nil
}

func clock(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not HH:MM", strings.TrimSpace(s))
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}

// Hours applies a Window to subscribers' time zones. A nil *Hours holds
// nobody, so callers need no "is it configured" branch.
type Hours struct {
	window Window
	mu     sync.Mutex
	zones  map[string]*time.Location
}

// New returns the quiet hours of w; nil w gives nil (no quiet hours).
func New(w *Window) *Hours {
	if w == nil {
		return nil
	}
	return &Hours{window: *w, zones: map[string]*time.Location{}}
}

// Until returns when the window containing now ends for a subscriber in
// zone, or the zero time when now is outside it. Subscribers without a
// known time zone are never held: guessing one would be worse.
func (q *Hours) Until(zone string, now time.Time) time.Time {
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
		return wallClock(midnight, end)
	case start > end && at >= start: // 22:00-08:00, evening side
		return wallClock(midnight.AddDate(0, 0, 1), end)
	case start > end && at < end: // 22:00-08:00, morning side
		return wallClock(midnight, end)
	}
	return time.Time{}
}

// wallClock is midnight plus a wall-clock offset, computed on the calendar
// so a daylight-saving change that day does not shift it.
func wallClock(midnight time.Time, offset time.Duration) time.Time {
	return time.Date(midnight.Year(), midnight.Month(), midnight.Day(),
		int(offset/time.Hour), int(offset%time.Hour/time.Minute), 0, 0, midnight.Location())
}

func (q *Hours) location(zone string) *time.Location {
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
