package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The packed subscriber record of keys.go, as Go reads it.

var statusByCode = map[string]Status{"p": Pending, "a": Active, "u": Unsubscribed, "b": Bounced, "c": Complained}

var codeByStatus = map[Status]string{Pending: "p", Active: "a", Unsubscribed: "u", Bounced: "b", Complained: "c"}

// at36 is a time as the records store it: unix ms in base 36.
func at36(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 36) }

func time36(s string) time.Time { return unixMilli(s, 36) }

// unixMilli reads unix milliseconds written in base; empty or zero is the
// zero time (the event has not happened).
func unixMilli(s string, base int) time.Time {
	n, err := strconv.ParseInt(s, base, 64)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// decodeRecord reads a subscriber from its id and packed record.
func decodeRecord(id, rec string) (Subscriber, error) {
	f := strings.Split(rec, recordSep)
	n, err := strconv.ParseInt(id, 10, 64)
	if len(f) != 7 || err != nil {
		// Not the record itself: it holds the address and the name, and
		// this error may reach a log.
		return Subscriber{}, fmt.Errorf("subscriber %s: unreadable record (%d fields, want 7)", id, len(f))
	}
	st, ok := statusByCode[f[0]]
	if !ok {
		return Subscriber{}, fmt.Errorf("subscriber %s: unknown status %q", id, f[0])
	}
	return Subscriber{
		ID: n, Status: st, CreatedAt: time36(f[1]), ConfirmedAt: time36(f[2]), UnsubscribedAt: time36(f[3]),
		Email: f[4], Name: f[5], Timezone: f[6],
	}, nil
}

// errSeparator refuses a field that would break the record apart.
var errSeparator = errors.New("a field holds the record separator (U+001F)")

func checkFields(fields ...string) error {
	for _, f := range fields {
		if strings.Contains(f, recordSep) {
			return errSeparator
		}
	}
	return nil
}

// decodeResult reads a subscriber script's answer: a code, then the id,
// the packed record and, from the scripts that read them, the topics and
// whether the subscriber is reconfirming.
func decodeResult(res []string) (Subscriber, error) {
	if len(res) == 0 {
		return Subscriber{}, errors.New("empty script result")
	}
	var sub Subscriber
	if len(res) >= 3 {
		var err error
		if sub, err = decodeRecord(res[1], res[2]); err != nil {
			return Subscriber{}, err
		}
		if len(res) >= 4 {
			sub.Topics = splitTopics(res[3])
		}
		sub.Reconfirming = len(res) >= 5 && res[4] == "1"
		sub.Ended = len(res) >= 6 && res[5] == "1"
		if len(res) >= 8 {
			sub.Tags, sub.Fields = splitList(res[6]), unpackFields(res[7])
		}
	}
	switch res[0] {
	case "ok":
		return sub, nil
	case "active":
		return sub, ErrAlreadyActive
	case "notpending":
		return sub, ErrNotPending
	case "notfound":
		return sub, ErrNotFound
	case "exists":
		return sub, ErrExists
	case "held":
		return sub, ErrConfirmHeld
	case "suppressed":
		return sub, ErrSuppressed
	case "notsuppressed":
		return sub, ErrNotSuppressed
	case "notactive":
		return sub, ErrNotActive
	case "erased":
		return sub, ErrErased
	}
	return sub, fmt.Errorf("unexpected script result %q", res[0])
}

// splitTopics reads a comma-separated topic list; none is an empty list,
// not nil, so that JSON shows [].
func splitTopics(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

// StatusByID reads subscriber id's status alone (one HGET of its
// record): what a mail about to go re-checks when the reader was read
// some time before (an issue batch sends for seconds after reading its
// readers). A subscriber not found (erased) is ErrNotFound.
func (r *Redis) StatusByID(ctx context.Context, id int64) (Status, error) {
	rec, err := r.rdb.HGet(ctx, bucketKey(sfxSubs, id), strconv.FormatInt(id, 10)).Result()
	if errors.Is(err, redis.Nil) || id <= 0 {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("status of subscriber %d: %w", id, err)
	}
	code, _, _ := strings.Cut(rec, recordSep)
	st, ok := statusByCode[code]
	if !ok {
		return "", fmt.Errorf("subscriber %d: unknown status %q", id, code)
	}
	return st, nil
}
