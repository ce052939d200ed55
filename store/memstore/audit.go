package memstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/store"
)

// Record implements audit.Recorder, with ids like the Redis stream's.
func (m *Memory) Record(_ context.Context, e audit.Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.At.IsZero() {
		e.At = m.now()
	}
	msec, seq := e.At.UnixMilli(), 0
	if n := len(m.auditLog); n > 0 {
		lastMs, lastSeq := auditID(m.auditLog[n-1].ID)
		if msec <= lastMs {
			msec, seq = lastMs, lastSeq+1
		}
	}
	e.ID = fmt.Sprintf("%d-%d", msec, seq)
	m.auditLog = append(m.auditLog, e)
	if len(m.auditLog) > audit.MaxEntries {
		m.auditLog = m.auditLog[len(m.auditLog)-audit.MaxEntries:]
	}
	return nil
}

// AuditEntries implements audit.Reader.
func (m *Memory) AuditEntries(_ context.Context, after string, limit int) ([]audit.Entry, error) {
	if err := store.CheckAuditID(after); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []audit.Entry
	for i := len(m.auditLog) - 1; i >= 0 && len(out) < limit; i-- {
		e := m.auditLog[i]
		if after == "" || idLess(e.ID, after) {
			out = append(out, e)
		}
	}
	return out, nil
}

func auditID(id string) (msec int64, seq int) {
	a, b, _ := strings.Cut(id, "-")
	msec, _ = strconv.ParseInt(a, 10, 64)
	seq, _ = strconv.Atoi(b)
	return msec, seq
}

func idLess(a, b string) bool {
	am, as := auditID(a)
	bm, bs := auditID(b)
	return am < bm || am == bm && as < bs
}
