package form

import (
	"errors"
	"net/http"
	"time"

	"github.com/newsletter/newsletter/api"
)

// Send is the send form: now, at a time (UTC), or at a local hour in
// each reader's time zone.
type Send struct {
	When      string // "now", "at" or "local"
	At        string // "2006-01-02T15:04" (a datetime-local field), UTC
	LocalTime string // "09:00"
}

// NewSend reads the send form.
func NewSend(w http.ResponseWriter, r *http.Request) (Send, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Send{}, err
	}
	return Send{When: value(r, "when"), At: value(r, "at"), LocalTime: value(r, "local_time")}, nil
}

// Request is the send as api.SendIssue takes it; a time that does not
// parse is an error to show (api.SendIssue checks the rest).
func (f Send) Request() (api.SendRequest, error) {
	switch f.When {
	case "", "now":
		return api.SendRequest{}, nil
	case "at":
		t, err := time.Parse("2006-01-02T15:04", f.At)
		if err != nil {
			return api.SendRequest{}, errors.New("at: a date and time, e.g. 2026-01-05 09:00 (UTC)")
		}
		return api.SendRequest{At: t.UTC().Format(time.RFC3339)}, nil
	case "local":
		if f.LocalTime == "" {
			return api.SendRequest{}, errors.New("local time: an hour HH:MM, e.g. 09:00")
		}
		return api.SendRequest{LocalTime: f.LocalTime}, nil
	}
	return api.SendRequest{}, errors.New("when: now, at a time, or at a local hour")
}
