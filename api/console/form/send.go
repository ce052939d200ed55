package form

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/newsletter/newsletter/services/issues"
)

// Send is the send form (and the reschedule form, which has no "now"):
// now, at a time (UTC), or at a local hour in each reader's time zone;
// with the audience the page showed (or the publisher typed, above the
// console's threshold), the version the page showed, and "force" to send
// to nobody.
type Send struct {
	When      string // "now", "at" or "local"
	At        string // "2006-01-02T15:04" (a datetime-local field), UTC
	LocalTime string // "09:00"
	Audience  string // the readers the publisher agreed to ("": not asked)
	Version   int
	Force     bool
	// IgnoreChecks sends past the pre-send checks' errors.
	IgnoreChecks bool
}

// NewSend reads the send form.
func NewSend(w http.ResponseWriter, r *http.Request) (Send, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Send{}, err
	}
	f := Send{When: value(r, "when"), At: value(r, "at"), LocalTime: value(r, "local_time"),
		Audience: value(r, "audience"), Force: value(r, "force") == "on",
		IgnoreChecks: value(r, "ignore_checks") == "on"}
	if v := value(r, "version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return Send{}, errors.New("version: the form is damaged; open the issue again")
		}
		f.Version = n
	}
	return f, nil
}

// Schedule is the send as issues.Service takes it; a time that does not
// parse is an error to show (the service checks the rest), and so is no
// choice at all: the console never sends now by default (issue #46).
func (f Send) Schedule() (issues.When, error) {
	switch f.When {
	case "":
		return issues.When{}, errors.New("when: choose now, a time, or a local hour")
	case "now":
		return issues.When{}, nil
	case "at":
		t, err := time.Parse("2006-01-02T15:04", f.At)
		if err != nil {
			return issues.When{}, errors.New("at: a date and time, e.g. 2026-01-05 09:00 (UTC)")
		}
		return issues.When{At: t.UTC().Format(time.RFC3339)}, nil
	case "local":
		if f.LocalTime == "" {
			return issues.When{}, errors.New("local time: an hour HH:MM, e.g. 09:00")
		}
		return issues.When{LocalTime: f.LocalTime}, nil
	}
	return issues.When{}, errors.New("when: now, at a time, or at a local hour")
}

// Options are the send's safeguards: the audience agreed to (a number
// typed that is not one is an error to show), the version seen, force.
func (f Send) Options() (issues.SendOptions, error) {
	opt := issues.SendOptions{Version: f.Version, Force: f.Force, IgnoreChecks: f.IgnoreChecks}
	if f.Audience != "" {
		n, err := strconv.ParseInt(f.Audience, 10, 64)
		if err != nil || n < 0 {
			return opt, errors.New("readers: type the number of readers the page shows")
		}
		opt.ConfirmAudience = &n
	}
	return opt, nil
}
