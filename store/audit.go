package store

import (
	"context"
	"errors"
	"regexp"

	"github.com/redis/go-redis/v9"

	"github.com/newsletter/newsletter/internal/audit"
)

// ErrBadAuditID is an `after` that is no entry's id.
var ErrBadAuditID = errors.New("after: an audit entry's id (like 1767225600000-0)")

// auditIDPattern is a stream id: milliseconds, a dash, a sequence.
var auditIDPattern = regexp.MustCompile(`^[0-9]{1,20}-[0-9]{1,20}$`)

// CheckAuditID tells whether id may be an entry's id ("" too: the
// newest).
func CheckAuditID(id string) error {
	if id != "" && !auditIDPattern.MatchString(id) {
		return ErrBadAuditID
	}
	return nil
}

// Record implements audit.Recorder: one XADD that trims the stream to
// about audit.MaxEntries (approximately, so trimming costs nothing
// between whole nodes).
func (r *Redis) Record(ctx context.Context, e audit.Entry) error {
	if e.At.IsZero() {
		e.At = r.now()
	}
	return r.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: keyAudit, MaxLen: audit.MaxEntries, Approx: true,
		Values: []any{"at", ms(e.At), "actor", e.Actor, "role", e.Role, "action", e.Action, "target", e.Target, "detail", e.Detail},
	}).Err()
}

// AuditEntries implements audit.Reader.
func (r *Redis) AuditEntries(ctx context.Context, after string, limit int) ([]audit.Entry, error) {
	if err := CheckAuditID(after); err != nil {
		return nil, err
	}
	start := "+"
	if after != "" {
		start = "(" + after
	}
	msgs, err := r.rdb.XRevRangeN(ctx, keyAudit, start, "-", int64(limit)).Result()
	if err != nil {
		return nil, err
	}
	out := make([]audit.Entry, 0, len(msgs))
	for _, m := range msgs {
		str := func(k string) string { s, _ := m.Values[k].(string); return s }
		out = append(out, audit.Entry{
			ID: m.ID, At: msTime(str("at")), Actor: str("actor"), Role: str("role"),
			Action: str("action"), Target: str("target"), Detail: str("detail"),
		})
	}
	return out, nil
}
